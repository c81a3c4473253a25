"""``jobfence top``: the live terminal view (textual).

The app never talks to PostgreSQL itself: it calls ``read`` (a snapshot, or an exception
whose message is shown) on a worker thread, so a slow or vanished server never freezes the
keyboard, and ``q`` always quits.
"""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import timezone
from typing import Callable

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from .snapshot import Snapshot
from .view import TOP_COLUMNS, RateTracker, Table, depth_table, kinds_table, seconds, window_caption

ALERT = "bold red"


def describe(exc: BaseException) -> str:
    """The one line shown for a failed refresh (a ClickException already carries it)."""
    format_message = getattr(exc, "format_message", None)
    if callable(format_message):
        return format_message()
    return f"{type(exc).__name__}: {exc}".strip()


class TopApp(App):
    TITLE = "jobfence top"
    CSS = """
    Screen { layout: vertical; }
    #status { height: auto; padding: 0 1; background: $panel; }
    #status.down { background: darkred; color: white; }
    .caption { height: 1; padding: 0 1; text-style: bold; margin-top: 1; }
    DataTable { height: auto; max-height: 50%; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        # Without this, textual only tells the user to press ctrl+q.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, read: Callable[[], Snapshot], first: Snapshot, *, interval: float,
                 target: str):
        super().__init__()
        self._read = read
        self._interval = interval
        self._target = target
        self._rates = RateTracker()
        self._reading = False
        self._last_ok: float | None = None
        self._first = first

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static("queues (now)", classes="caption")
        yield DataTable(id="queues", cursor_type="none", zebra_stripes=True)
        yield Static("kinds", id="kinds-caption", classes="caption")
        yield DataTable(id="kinds", cursor_type="none", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        loop = asyncio.get_running_loop()
        # A SIGINT or SIGTERM from outside (the terminal sends ctrl+c as a key) must leave
        # through the same door as q, so the terminal is restored.
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.exit)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        self._show(self._first)
        self.set_interval(self._interval, self._tick)

    def _tick(self) -> None:
        if self._reading:
            return
        self._reading = True
        self.run_worker(self._refresh, thread=True, exit_on_error=False, group="read")

    def _refresh(self) -> None:
        try:
            snap = self._read()
        except Exception as exc:  # noqa: BLE001 - any failure is shown, the next tick retries
            self.call_from_thread(self._show_error, describe(exc))
        else:
            self.call_from_thread(self._show, snap)
        finally:
            self._reading = False

    def _status(self, text: str, down: bool) -> None:
        status = self.query_one("#status", Static)
        status.set_class(down, "down")
        status.update(Text(text))

    def _show(self, snap: Snapshot) -> None:
        self._last_ok = time.monotonic()
        rates = self._rates.update(snap)
        measured = any(r.between for r in rates.values())
        stamp = snap.taken_at.astimezone(timezone.utc).strftime("%H:%M:%SZ")
        self._status(f"{self._target}  ·  every {seconds(self._interval)}  ·  updated {stamp}",
                     down=False)
        self.query_one("#kinds-caption", Static).update(
            f"kinds over the {window_caption(snap)}; rates "
            + ("between refreshes" if measured else "averaged over the window"))
        self._fill("#queues", depth_table(snap), "no queues and no declared kinds")
        self._fill("#kinds", kinds_table(snap, TOP_COLUMNS, rates), "no kinds")

    def _show_error(self, message: str) -> None:
        message = " ".join(message.split())  # libpq's messages span lines; the status line is one
        since = "" if self._last_ok is None else \
            f"; figures below are {seconds(time.monotonic() - self._last_ok)} old"
        self._status(f"{message}  ·  retrying every {seconds(self._interval)}{since}", down=True)

    def _fill(self, selector: str, table: Table, empty: str) -> None:
        widget = self.query_one(selector, DataTable)
        widget.clear(columns=True)
        widget.add_columns(*[Text(h, justify="right" if n else "left")
                             for h, n in zip(table.headers, table.numeric)])
        if not table.rows:
            widget.add_row(*[Text(empty if i == 0 else "") for i in range(len(table.headers))])
            return
        for row in table.rows:
            widget.add_row(*[Text(c.text, style=ALERT if c.alert else "",
                                  justify="right" if n else "left")
                             for c, n in zip(row, table.numeric)])
