"""The threads of a Sebulba run and how they end: together, within a bounded time, with the first error raised.

Every thread is started through a `Supervisor`. A thread that raises records its error and sets the one stop
signal; every blocking hand-off (a bounded queue's put or get) waits in short slices and gives up once the signal
is set, so no thread can stay blocked on a peer that has gone. The main thread (the learner) re-raises the first
error as soon as it next waits, and `shutdown` joins every thread with a timeout, naming any that did not end.

Ctrl-C is caught as a request, not raised where it lands: Python's default handler raises KeyboardInterrupt in
whatever Python code the main thread is running, and when that is a garbage-collection callback (jax registers
one) the exception is printed as "ignored" and lost, so the run goes on. `stop_on_ctrl_c` records the request and
sets the stop signal; the learner raises KeyboardInterrupt at its next wait. A second Ctrl-C raises at once.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from types import FrameType
from typing import Callable, Iterator, List, Optional, Tuple, TypeVar

POLL_SECONDS = 0.05  # how often a blocked hand-off looks at the stop signal: shutdown's latency

Item = TypeVar("Item")  # what a queue hands off


class Stopped(Exception):
    """The run is stopping (another thread failed, the budget ended, or the learner was interrupted)."""


class Supervisor:
    def __init__(self, shutdown_timeout_seconds: float):
        self.stop = threading.Event()
        self._shutdown_timeout_seconds = shutdown_timeout_seconds
        self._threads: List[threading.Thread] = []
        self._errors: List[Tuple[str, BaseException]] = []
        self._lock = threading.Lock()
        self.interrupted = False  # Ctrl-C was pressed: the learner raises KeyboardInterrupt at its next wait

    def interrupt(self) -> None:
        self.interrupted = True
        self.stop.set()

    def start(self, name: str, target: Callable[..., None], *args: object) -> threading.Thread:
        def guarded() -> None:
            try:
                target(*args)
            except Stopped:
                pass
            except BaseException as error:  # any failure, however raised, must stop the whole run
                with self._lock:
                    self._errors.append((name, error))
                self.stop.set()

        # daemon: should a thread ever ignore the stop signal, it still cannot keep the process alive
        thread = threading.Thread(target=guarded, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    @property
    def first_error(self) -> Optional[Tuple[str, BaseException]]:
        with self._lock:
            return self._errors[0] if self._errors else None

    def raise_if_failed(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was pressed, else re-raise the first thread's error in the caller's
        thread, saying which thread raised it."""
        if self.interrupted:
            raise KeyboardInterrupt
        failed = self.first_error
        if failed is not None:
            name, error = failed
            error.add_note(f"(raised in Sebulba thread {name!r}; every other thread was stopped)")
            raise error

    def put(self, channel: "queue.Queue[Item]", item: Item) -> None:
        """Blocks while `channel` is full; raises Stopped once the run stops."""
        while not self.stop.is_set():
            try:
                channel.put(item, timeout=POLL_SECONDS)
                return
            except queue.Full:
                continue
        raise Stopped

    def get(self, channel: "queue.Queue[Item]") -> Item:
        """Blocks while `channel` is empty; re-raises a thread's error, or raises Stopped, once the run stops."""
        while True:
            self.raise_if_failed()
            if self.stop.is_set():
                raise Stopped
            try:
                return channel.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue

    def shutdown(self) -> List[str]:
        """Stop every thread and wait for each (up to the timeout); returns the names of any still running."""
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=self._shutdown_timeout_seconds)
        return [thread.name for thread in self._threads if thread.is_alive()]


@contextlib.contextmanager
def stop_on_ctrl_c(supervisor: Supervisor) -> Iterator[None]:
    """Within this block, Ctrl-C stops `supervisor`'s run (see the module's docstring); after it, if Ctrl-C was
    pressed and nothing else was raised, KeyboardInterrupt is raised. Only the main thread can own a signal
    handler: elsewhere the block changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_ctrl_c(signum: int, frame: Optional[FrameType]) -> None:
        if supervisor.interrupted:
            raise KeyboardInterrupt  # the second press: the user will not wait for the threads
        supervisor.interrupt()

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield
    finally:
        # None: the previous handler was not installed from Python and cannot be restored; use Python's default
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    if supervisor.interrupted:
        raise KeyboardInterrupt
