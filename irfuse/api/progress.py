"""Progress of a call that runs in chunks, drawn with rich: asked for by `prog(...,
progress=True)` (the API draws nothing unless asked) and by `irfuse run` on a terminal."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def progress_bar(title: str, after_s: float = 0.0, stream=None) -> Iterator[Callable[[int, int], None]]:
    """A `progress(done, total)` callback drawing a bar of chunks done on `stream` (stderr by
    default), from the first report at least `after_s` seconds into the call that is not its
    last: a call shorter than that draws nothing. The bar stays, completed, when the call ends."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    start = time.perf_counter()
    state: dict = {"bar": None, "task": None}

    def report(done: int, total: int) -> None:
        bar = state["bar"]
        if bar is None:
            if done >= total or time.perf_counter() - start < after_s:
                return
            bar = state["bar"] = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                          TextColumn("chunks"), TimeElapsedColumn(),
                                          console=Console(file=stream or sys.stderr, highlight=False))
            bar.start()
            state["task"] = bar.add_task(title, total=total)
        bar.update(state["task"], completed=done, total=total)

    try:
        yield report
    finally:
        if state["bar"] is not None:
            state["bar"].stop()
