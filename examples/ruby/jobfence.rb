# A jobfence worker and producer in Ruby, on the SQL contract alone (docs/sql-api.md,
# "Write a worker in your language"): PostgreSQL decides every transition and fences every
# write with (lease_version, token); Redis only carries ids that say "look at this job".
# Debian's ruby-pg and ruby-redis are all it needs.
require 'json'
require 'pg'
require 'redis'

module Jobfence
  BANDS = 10 # priorities 0..9: NS:{queue}:ready, then NS:{queue}:ready:p1 .. :p9
  JOB_ID = /\A[1-9][0-9]{0,18}\z/ # anything else in a list is not ours: never claimed
  ARRAY = PG::TextEncoder::Array.new

  # A handler's error that no retry can mend: the job fails for good.
  class Fatal < StandardError; end

  class Conn
    attr_reader :pg, :redis, :ns, :database_url

    def initialize(database_url, redis_url)
      @database_url = database_url
      @pg = PG.connect(database_url)
      @redis = Redis.new(url: redis_url)
      # Every key carries the deployment's namespace, asked once (jobs.redis_namespace).
      @ns = @pg.exec('SELECT jobs.redis_namespace() AS ns')[0]['ns']
    end

    def key(queue, list, priority = 0)
      "#{@ns}:{#{queue}}:#{list}#{priority.to_i.zero? ? '' : ":p#{priority}"}"
    end

    def close
      @redis.close
      @pg.close
    end
  end

  def self.sqlstate(error)
    error.respond_to?(:result) && error.result ? error.result.error_field(PG::PG_DIAG_SQLSTATE) : nil
  end

  # Producer: one jobs.submit_many (commit), then one push per job of its band; a failed push
  # leaves the job to the reaper's re-push (or mark it with jobs.mark_enqueue_failed).
  def self.submit_many(conn, specs)
    rows = conn.pg.exec_params(
      'SELECT id, queue, priority, run_after > now() AS later, extract(epoch FROM run_after) AS at ' \
      'FROM jobs.submit_many($1::jsonb)', [JSON.generate(specs.map { |s| s.merge(notify: false) })]).to_a
    conn.redis.pipelined do |pipe|
      rows.each do |r|
        if r['later'] == 't'
          pipe.zadd(conn.key(r['queue'], 'delayed', r['priority']), r['at'].to_f, r['id'])
        else
          pipe.lpush(conn.key(r['queue'], 'ready', r['priority']), r['id'])
        end
      end
    end
    rows.map { |r| r['id'].to_i }
  end

  # Worker: pop ids (one BLMPOP over the bands, most urgent first), claim them with tokens in
  # one call, run each handler with heartbeats, complete or fail with the lease's token.
  # JB001 means the lease is no longer ours (reaped, or finished elsewhere): drop the result,
  # never retry it.
  class Worker
    def initialize(conn, name:, handlers:, queue: 'default', batch: 50, beat_every: 1.0,
                   on_lease_lost: nil)
      @conn, @name, @handlers, @queue, @batch = conn, name, handlers, queue, batch
      @beat_every, @on_lease_lost = beat_every, on_lease_lost
      @keys = (0...BANDS).map { |band| conn.key(queue, 'ready', band) }
    end

    def run(stop)
      beats = PG.connect(@conn.database_url) # heartbeats run beside the handler
      until stop.call
        popped = @conn.redis.call('BLMPOP', '1', @keys.size.to_s, *@keys, 'RIGHT', 'COUNT', @batch.to_s)
        ids = (popped ? popped[1] : []).grep(JOB_ID)
        claim(ids).each { |lease| run_one(lease, beats) }
      end
    ensure
      beats&.close
    end

    private

    # A signal lost in Redis is no job lost: with nothing popped, ask PostgreSQL directly.
    def claim(ids)
      queues = ARRAY.encode([@queue])
      if ids.empty?
        @conn.pg.exec_params('SELECT * FROM jobs.claim_next_with_token($1, $2::text[], $3)',
                             [@name, queues, @batch]).to_a
      else
        @conn.pg.exec_params('SELECT * FROM jobs.claim_many_with_token($1::bigint[], $2, $3::text[])',
                             [ARRAY.encode(ids), @name, queues]).to_a
      end
    end

    def run_one(lease, beats)
      fence = [lease['job_id'], @name, lease['lease_version']]
      beating = heartbeat(beats, fence + [lease['token']])
      begin
        handler = @handlers.fetch(lease['kind']) { raise Fatal, "no handler for kind #{lease['kind']}" }
        result = handler.call(JSON.parse(lease['payload'] || 'null'), lease)
        @conn.pg.exec_params('SELECT * FROM jobs.complete($1, $2, $3, $4::jsonb, $5::uuid)',
                             fence + [JSON.generate(result), lease['token']])
      rescue PG::Error => e
        raise unless Jobfence.sqlstate(e) == 'JB001'
        @on_lease_lost&.call(lease, e)
      rescue StandardError => e
        begin
          @conn.pg.exec_params('SELECT * FROM jobs.fail($1, $2, $3, $4, $5, $6::uuid)',
                               fence + [e.message, e.is_a?(Fatal) ? 'f' : 't', lease['token']])
        rescue PG::Error => failed
          raise unless Jobfence.sqlstate(failed) == 'JB001'
          @on_lease_lost&.call(lease, failed)
        end
      ensure
        beating.call
      end
    end

    # Beats every beat_every seconds until the returned lambda is called; a missed beat is
    # retried by the next one, and the lease itself says when it is lost.
    def heartbeat(beats, args)
      lock, wake, over = Mutex.new, ConditionVariable.new, false
      thread = Thread.new do
        lock.synchronize do
          until over
            wake.wait(lock, @beat_every)
            next if over
            begin
              beats.exec_params('SELECT * FROM jobs.heartbeat($1, $2, $3, $4::uuid)', args)
            rescue PG::Error
              beats.reset if beats.status != PG::CONNECTION_OK
            end
          end
        end
      end
      lambda do
        lock.synchronize { over = true; wake.signal }
        thread.join
      end
    end
  end
end

# `ruby jobfence.rb worker [NAME]`: serve the demo kinds until SIGTERM (the tests crash it).
if $PROGRAM_NAME == __FILE__
  role, name = ARGV
  abort 'usage: ruby jobfence.rb worker [NAME]' unless role == 'worker'
  name ||= "ruby-#{Process.pid}"
  handlers = {
    'ruby.add' => ->(p, _) { { 'sum' => p['a'] + p['b'] } },
    'ruby.sleep' => ->(p, _) { sleep(p['ms'] / 1000.0); { 'slept' => p['ms'] } },
  }
  conn = Jobfence::Conn.new(ENV.fetch('JOBFENCE_DATABASE_URL'), ENV.fetch('JOBFENCE_REDIS_URL'))
  stopping = false
  Signal.trap('TERM') { stopping = true }
  puts JSON.generate(event: 'worker_ready', worker: name)
  $stdout.flush
  Jobfence::Worker.new(conn, name: name, handlers: handlers).run(-> { stopping })
  conn.close
end
