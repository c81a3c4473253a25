# Run by py/tests/test_ruby_worker.py against a fresh, deployed database and its own Redis
# database (JOBFENCE_DATABASE_URL, JOBFENCE_REDIS_URL): `ruby test/worker_test.rb` here.
require 'minitest/autorun'
require_relative '../jobfence'

class WorkerTest < Minitest::Test
  DB = ENV.fetch('JOBFENCE_DATABASE_URL')
  REDIS = ENV.fetch('JOBFENCE_REDIS_URL')
  ENTRY = File.expand_path('../jobfence.rb', __dir__)

  def setup
    @conn = Jobfence::Conn.new(DB, REDIS)
  end

  def teardown
    @conn.close
  end

  def until_true(what, seconds = 30)
    deadline = Time.now + seconds
    until yield
      flunk "timed out waiting for #{what}" if Time.now > deadline
      sleep 0.05
    end
  end

  def status(id)
    @conn.pg.exec_params('SELECT status, lease_version FROM jobs.get($1)', [id])[0]
  end

  def count(sql, ids)
    @conn.pg.exec_params(sql, [Jobfence::ARRAY.encode(ids)])[0]['n'].to_i
  end

  # A worker on its own connection, in a thread, until the block returns.
  def working(name, handlers)
    conn = Jobfence::Conn.new(DB, REDIS)
    stop = false
    thread = Thread.new { Jobfence::Worker.new(conn, name: name, handlers: handlers).run(-> { stop }) }
    yield
  ensure
    stop = true
    thread&.join
    conn&.close
  end

  def test_500_jobs_submitted_from_ruby_are_done_by_the_ruby_worker_each_once
    @conn.pg.exec("SELECT jobs.define_type('ruby.add')")
    ids = Jobfence.submit_many(@conn, (0...500).map { |n| { kind: 'ruby.add', payload: { a: n, b: 1 } } })
    working('ruby-w1', 'ruby.add' => ->(p, _) { { 'sum' => p['a'] + p['b'] } }) do
      until_true('500 jobs done') do
        count("SELECT count(*) AS n FROM unnest($1::bigint[]) AS i CROSS JOIN LATERAL jobs.get(i) AS j " \
              "WHERE j.status = 'done'", ids) == 500
      end
    end
    assert_equal 500, count("SELECT count(*) AS n FROM unnest($1::bigint[]) AS i CROSS JOIN LATERAL " \
                            "jobs.events(i) AS e WHERE e.reason = 'completed'", ids), 'one accepted completion per job'
    one = @conn.pg.exec_params('SELECT result FROM jobs.get($1)', [ids[41]])[0]
    assert_equal({ 'sum' => 42 }, JSON.parse(one['result']))
  end

  def test_a_stale_completion_is_refused_with_jb001_after_the_reaper_took_the_lease
    @conn.pg.exec("SELECT jobs.define_type('ruby.stale', lease_timeout => '1 second')")
    id, = Jobfence.submit_many(@conn, [{ kind: 'ruby.stale' }])
    lease = @conn.pg.exec_params("SELECT * FROM jobs.claim_with_token($1, 'ruby-old', ARRAY['default'])", [id])[0]
    refute_nil lease, 'claimed'
    until_true('the lease expired and was reaped', 10) do
      @conn.pg.exec('SELECT * FROM jobs.reap(100)')
      status(id)['status'] == 'queued'
    end
    error = assert_raises(PG::Error) do
      @conn.pg.exec_params('SELECT * FROM jobs.complete($1, $2, $3, $4::jsonb, $5::uuid)',
                           [id, 'ruby-old', lease['lease_version'], '{"late": true}', lease['token']])
    end
    assert_equal 'JB001', Jobfence.sqlstate(error)
    assert_equal 'queued', status(id)['status'], 'the stale result changed nothing'
  end

  def test_a_ruby_worker_killed_mid_job_leaves_it_to_the_reaper_and_another_finishes_it
    @conn.pg.exec("SELECT jobs.define_type('ruby.sleep', lease_timeout => '1 second')")
    id, = Jobfence.submit_many(@conn, [{ kind: 'ruby.sleep', payload: { ms: 60_000 } }])
    child = Process.spawn('ruby', ENTRY, 'worker', 'ruby-doomed', out: File::NULL, err: File::NULL)
    until_true('the child claimed the job') { status(id)['status'] == 'processing' }
    before = status(id)['lease_version'].to_i
    Process.kill('KILL', child)
    Process.wait(child)
    until_true('the reaper requeued it', 15) do
      @conn.pg.exec('SELECT * FROM jobs.reap(100)')
      status(id)['status'] == 'queued'
    end
    assert_equal before + 1, status(id)['lease_version'].to_i, 'the fence moved on'
    working('ruby-w2', 'ruby.sleep' => ->(_, _) { { 'slept' => 0 } }) do
      until_true('the survivor finished it') { status(id)['status'] == 'done' }
    end
    reasons = @conn.pg.exec_params('SELECT reason FROM jobs.events($1) ORDER BY id', [id]).map { |r| r['reason'] }
    assert_equal %w[submitted claimed reaped claimed completed], reasons
  end
end
