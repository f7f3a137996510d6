"""The widget's command server: the page's commands, run and answered.

The page asks for work with custom messages, declared in
:data:`iglens_viz.protocol.commands.COMMANDS`; each :class:`~iglens_viz.widget.IGLensWidget`
owns one :class:`CommandServer`, which reads every message, runs its kind's handler from
:data:`HANDLERS` and sends one answer envelope. Every command that computes runs in the
widget's worker thread wherever a kernel or marimo serves the page (:func:`runs_threaded`),
never in the comm handler, so the kernel hears a Cancel meanwhile; the server holds the
cancel flag, checks it at every block of a forward pass and every chunk of points, and
publishes the progress in the ``running`` and ``progress`` traits. The answers' dicts are
built in :mod:`iglens_viz.protocol.payload`; the widget's public methods (``causal_check``,
``gate_game``, …) set them.

A new command is its :class:`~iglens_viz.protocol.commands.CommandSpec` in ``COMMANDS`` and
one :class:`Handler` in :data:`HANDLERS` (checked complete when this module is imported),
then the view that sends it and the regenerated docs.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.estimators import progress_hook
from ..errors import IGLensError, InvalidRequestError
from ..lenses.fit import FitProgress, cached_fitted_kinds, fit_progress, kept_checkpoint
from ..protocol.commands import COMMANDS, Command, CommandKind, CommandSpec, answer, parse_command
from ..protocol.payload import fit_payload

if TYPE_CHECKING:
    from ..core.lens import IGLens
    from ..core.request import AttributionRequest
    from ..core.result import AttributionResult
    from .widget import IGLensWidget

__all__ = [
    "HANDLERS",
    "CommandServer",
    "Handler",
    "RecomputeCancelled",
    "check_handlers",
    "runs_threaded",
]


class RecomputeCancelled(IGLensError):
    """A recompute stopped by the Cancel button (or :meth:`IGLensWidget.cancel`)."""


@dataclass(frozen=True)
class Handler:
    """How the widget runs one kind of command."""

    run: Callable[[CommandServer, Command], None]
    """Does the command's work with ``server.widget``; an :class:`IGLensError` it raises is
    the answer's error (any other exception too, and it is logged)."""
    cancellable: bool = False
    """A ``cancel`` stops it at its next block or chunk of points (the others end in
    seconds)."""


class CommandServer:
    """The command path of one widget: dispatch, the worker thread, cancel and progress.

    Created by the widget, which hands it the lock that its page updates hold too
    (ipywidgets keeps the sync bookkeeping per widget, not per thread); it listens to the
    widget's custom messages from then on."""

    def __init__(self, widget: IGLensWidget, lock: contextlib.AbstractContextManager[Any]) -> None:
        self.widget = widget
        self.lock = lock
        self.cancelled = threading.Event()
        """Set by a Cancel; the running command stops at its next check."""
        self.worker: threading.Thread | None = None
        """The thread of the last background command (None before the first)."""
        self._computing = threading.Lock()  # one command computes at a time (the engine's)
        self._fit_shown = (0.0, "")  # when and which fit phase last reached the page
        widget.on_msg(self._on_message)

    def _on_message(self, widget: Any, content: Any, buffers: Any) -> None:
        self.dispatch(content)

    # ------------------------------------------------------------------ dispatch

    def dispatch(self, message: Any) -> dict[str, Any] | None:
        """See :meth:`IGLensWidget.dispatch`."""
        try:
            command = parse_command(message)
        except InvalidRequestError as err:
            raw = message if isinstance(message, Mapping) else {}
            request_id, kind = raw.get("id"), raw.get("kind")
            return self.answer(
                request_id if isinstance(request_id, str) else "",
                kind if isinstance(kind, str) and kind in COMMANDS else "",
                err,
            )
        spec = command.spec
        if spec.background:
            return self._start(command)
        # A command answered while a background one runs cannot wait for the compute lock
        # that one holds: it is answered in the comm handler (hello, cancel, save compute
        # nothing). The others are computed in the widget's thread, never in the comm
        # handler: Colab and VS Code run comm messages on the kernel's main shell (no
        # subshells), which a handler blocks.
        if spec.while_running or not runs_threaded(self.widget.threaded):
            return self._run(command)
        threading.Thread(
            target=self._compute, args=(command,), name=f"iglens-{command.kind}", daemon=True
        ).start()
        return None

    def answer(
        self, request_id: str, command: str, error: BaseException | None = None
    ) -> dict[str, Any]:
        """Send the answer envelope of a command to the page, and return it."""
        envelope = answer(request_id, command, self.widget.result_id, error)
        with self.lock:
            self.widget.send(envelope)
        return envelope

    def _compute(self, command: Command) -> dict[str, Any]:
        """:meth:`_run` in a worker thread, one command at a time."""
        with self._computing:
            return self._run(command)

    def _run(self, command: Command) -> dict[str, Any]:
        widget, spec = self.widget, command.spec
        error: BaseException | None = None
        try:
            if widget.running and not (spec.background or spec.while_running):
                raise IGLensError(f"{self._running_name()} is running: ask again when it is done")
            HANDLERS[command.kind].run(self, command)
        except IGLensError as err:
            error = err
        except Exception as err:  # unexpected: say so on the page, and in the kernel log
            widget.log.exception("IGLensWidget: the %s command failed", command.kind)
            error = err
        finally:
            if spec.background:
                with self.lock, widget.hold_sync():
                    widget.running = {}
                    widget.progress = -1.0
        return self.answer(command.id, command.kind, error)

    def _start(self, command: Command) -> dict[str, Any] | None:
        widget = self.widget
        if widget.running:
            busy = IGLensError(f"{self._running_name()} is running: wait for it or cancel it")
            return self.answer(command.id, command.kind, busy)
        self.cancelled.clear()
        with self.lock, widget.hold_sync():
            widget.running = {"id": command.id, "command": command.kind}
            widget.progress = -1.0
        if not runs_threaded(widget.threaded):
            return self._run(command)
        self.worker = threading.Thread(
            target=self._compute, args=(command,), name=f"iglens-{command.kind}", daemon=True
        )
        self.worker.start()
        return None

    def _running_name(self) -> str:
        running = self.widget.running
        return f"{running.get('command')} {running.get('id')!r}"

    def refuse_while_running(self) -> None:
        """Raise if a background command runs (a notebook call would race it)."""
        if self.widget.running:
            raise IGLensError(f"{self._running_name()} is running: wait for it or cancel it")

    # ------------------------------------------------------------------ cancel and progress

    def cancel(self) -> None:
        """See :meth:`IGLensWidget.cancel`."""
        self.cancelled.set()

    def check_cancelled(self) -> None:
        """Where every cancellable command stops: raise once the page's Cancel arrived."""
        if self.cancelled.is_set():
            raise RecomputeCancelled("cancelled: the previous result is still shown")

    def report(self, done: int, total: int) -> None:
        """The progress hook of a recompute: publish the share done; stop when cancelled."""
        self.check_cancelled()
        value = round(done / total, 3) if total else -1.0
        if value != self.widget.progress:
            with self.lock:
                self.widget.progress = value

    def publish(self, share: float) -> None:
        """Show ``share`` of the command done (never backwards within a command)."""
        value = round(share, 2)
        if value > self.widget.progress:
            with self.lock:
                self.widget.progress = value

    @contextlib.contextmanager
    def cancellable(
        self, engine: IGLens, forward: Callable[[int], None] | None = None
    ) -> Iterator[None]:
        """Within the block: every decoder block the model runs in this thread (the
        generation's steps, the trace, a versus continuation) first checks for a Cancel and
        stops the command there (:class:`RecomputeCancelled`), and tells ``forward`` how
        many blocks ran so far. Other threads using the same model are not touched."""
        owner = threading.current_thread()
        count = itertools.count(1)

        def before_block(module: Any, args: Any) -> None:
            if threading.current_thread() is not owner:
                return
            self.check_cancelled()
            done = next(count)
            if forward is not None:
                forward(done)

        handles = [b.register_forward_pre_hook(before_block) for b in engine.adapter.blocks]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    @contextlib.contextmanager
    def lens_fits(self) -> Iterator[None]:
        """Within the block, a lens fitted on its first use (``lens="tuned"``, …) reports
        each phase to the page (``running["fit"]`` and ``progress``) and stops at a Cancel
        within one step (:meth:`fit_report`); a cancelled fit's answer names the checkpoint
        it kept. ``cached_lenses`` is brought up to date after the block."""
        try:
            with fit_progress(self.fit_report):
                yield
        except RecomputeCancelled as err:
            kept = kept_checkpoint(err)
            if kept is None:
                raise
            raise RecomputeCancelled(
                f"cancelled: {kept} is kept, so choosing the {kept.kind} lens again resumes its "
                f"fit; the previous result is still shown"
            ) from None
        finally:
            self.show_cached_lenses()

    def fit_report(self, report: FitProgress) -> None:
        """A lens fit's progress callback: stop on Cancel, else show the report (the first
        and last of each phase, and at most four a second)."""
        self.check_cancelled()
        now, phase = time.monotonic(), f"{report.kind}:{report.phase}"
        last = report.done >= report.total
        if phase == self._fit_shown[1] and not last and now - self._fit_shown[0] < 0.25:
            return
        self._fit_shown = (now, phase)
        widget = self.widget
        with self.lock, widget.hold_sync():
            if widget.running:
                widget.running = {**widget.running, "fit": fit_payload(report)}
            widget.progress = round(report.done / report.total, 3) if report.total else -1.0

    def show_cached_lenses(self) -> None:
        """Tell the page which fitted lenses are cached for the model (see the trait)."""
        widget = self.widget
        if widget.engine is None:
            return
        try:
            kinds = cached_fitted_kinds(widget.engine.model)
        except Exception as err:  # a hint for the page: never what stops the widget
            widget.log.warning("IGLensWidget: cannot tell which lenses are cached (%r)", err)
            return
        if kinds != widget.cached_lenses:
            with self.lock:
                widget.cached_lenses = kinds

    def run_ask(self, engine: IGLens, request: AttributionRequest) -> AttributionResult:
        """Run a new question's request and show its result, with its progress published
        (the forward passes, generation included, block by block; then the interior points,
        if any) and cancellable at every block and every chunk of points."""
        points = request.estimator == "riemann" or request.steps > 1
        share = 0.5 if points else 1.0  # of the bar: the forward passes' part
        passes = request.max_new_tokens + 1 + (request.versus is not None)
        expected = max(1, passes * int(engine.n_blocks))

        def forward(done: int) -> None:
            self.publish(share * min(done / expected, 1.0))

        def report(done: int, total: int) -> None:
            self.check_cancelled()
            self.publish(share + (1 - share) * (done / total if total else 0.0))

        with progress_hook(report), self.cancellable(engine, forward), self.lens_fits():
            new = engine.run(request)
        self.widget._show(new)
        return new


# ---------------------------------------------------------------------- the handlers


def _shown_result(server: CommandServer, command: Command) -> None:
    """Refuse a command about a result the widget no longer shows (the page was behind)."""
    asked, shown = command.fields["result_id"], server.widget.result_id
    if asked != shown:
        raise InvalidRequestError(
            f"this {command.kind} command is about result {asked!r}, but the widget now "
            f"shows {shown!r}: ask again on the shown result"
        )


def _hello(server: CommandServer, command: Command) -> None:
    """Nothing to do: the answer tells the page that a kernel listens."""


def _save(server: CommandServer, command: Command) -> None:
    """Write the page's picture where the kernel runs (its frame blocked the download)."""
    path = Path.cwd() / command.fields["name"]
    path.write_bytes(command.fields["data"])
    server.widget.log.info("IGLensWidget: the page's picture saved to %s", path)


def _cancel(server: CommandServer, command: Command) -> None:
    target, running = command.fields["request_id"], server.widget.running
    if running.get("id") != target:
        now = f" ({running.get('command')} {running.get('id')!r} is)" if running else ""
        raise InvalidRequestError(f"nothing to cancel: {target!r} is not running{now}")
    kind = running.get("command")
    if kind not in HANDLERS or not HANDLERS[kind].cancellable:
        raise InvalidRequestError(f"a {kind} cannot be stopped midway; it ends in seconds")
    server.cancel()


def _recompute(server: CommandServer, command: Command) -> None:
    widget = server.widget
    engine = widget._require_engine("recomputing")
    _shown_result(server, command)
    request = widget.attribution.request.with_controls(command.fields["controls"])
    if "versus" in command.fields:  # the student view's "compare with…" box
        request = request.replace(versus=command.fields["versus"])
    with progress_hook(server.report), server.cancellable(engine), server.lens_fits():
        new = engine.run(request)
    widget._show(new)


def _ask(server: CommandServer, command: Command) -> None:
    engine = server.widget._require_engine("asking a new question")
    _shown_result(server, command)
    asked = command.fields
    request = server.widget.ask_request(
        asked["prompt"], versus=asked.get("versus"), max_new_tokens=asked.get("max_new_tokens")
    )
    server.run_ask(engine, request)


def _ablation(server: CommandServer, command: Command) -> None:
    _shown_result(server, command)
    fields = command.fields
    server.widget.causal_check(
        fields["position"],
        fields.get("positions", "target"),
        fields.get("counterfactual"),
        fields.get("contrast"),
        request_id=command.id,
    )


def _gates(server: CommandServer, command: Command) -> None:
    _shown_result(server, command)
    fields = command.fields
    engine = server.widget._require_engine("the gate game")
    with progress_hook(server.report), server.cancellable(engine):
        server.widget.gate_game(
            fields["position"],
            fields["counterfactual"],
            steps=fields.get("steps") or 16,
            request_id=command.id,
        )


def _path(server: CommandServer, command: Command) -> None:
    _shown_result(server, command)
    fields = command.fields
    server.widget.interior_path(fields["position"], fields["steps"], request_id=command.id)


def _components(server: CommandServer, command: Command) -> None:
    _shown_result(server, command)
    server.widget.split_components(command.fields["position"], request_id=command.id)


HANDLERS: dict[CommandKind, Handler] = {
    "hello": Handler(_hello),
    "recompute": Handler(_recompute, cancellable=True),
    "ask": Handler(_ask, cancellable=True),
    "cancel": Handler(_cancel),
    "ablation": Handler(_ablation),
    "gates": Handler(_gates, cancellable=True),
    "path": Handler(_path),
    "components": Handler(_components),
    "save": Handler(_save),
}
"""The handler of every command in :data:`~iglens_viz.protocol.commands.COMMANDS`, by kind
(looked up at each dispatch)."""


def check_handlers(
    handlers: Mapping[CommandKind, Handler],
    commands: Mapping[CommandKind, CommandSpec] = COMMANDS,
) -> None:
    """Raise a :class:`LookupError` naming every command without a handler, and every
    handler of no command (run on :data:`HANDLERS` when this module is imported)."""
    missing = [kind for kind in commands if kind not in handlers]
    extra = [kind for kind in handlers if kind not in commands]
    if missing or extra:
        raise LookupError(
            f"the command server's handlers do not match COMMANDS: no handler for "
            f"{missing or 'none'}; a handler of no command: {extra or 'none'}"
        )


check_handlers(HANDLERS)


def runs_threaded(setting: bool | None) -> bool:
    """Whether the widget computes its commands in its worker thread:
    :attr:`IGLensWidget.threaded` when set, else whenever this process runs an IPython
    kernel (also for the page's requests, which arrive in a comm handler outside any cell)
    or a marimo notebook or app."""
    if setting is not None:
        return bool(setting)
    return _running_kernel() is not None or _in_marimo()


def _running_kernel() -> Any:
    """The IPython kernel this process runs, or None (a script, a terminal IPython).

    Asked through IPython's API, not the ``get_ipython`` builtin: IPython installs that only
    while a cell runs, and the page's requests arrive in comm handlers outside any cell."""
    # Looked up, not imported: if nothing imported IPython, there is no shell, let alone a
    # kernel (and IPython stays an optional dependency).
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    return getattr(get_ipython(), "kernel", None) if callable(get_ipython) else None


def _in_marimo() -> bool:
    """Whether this process runs a marimo notebook or app (``marimo edit`` / ``marimo run``):
    marimo reads the page's next message, a Cancel, only after the handler of the previous
    one returns, so a recompute must run in the widget's thread there too. Looked up, not
    imported (marimo is an optional front end)."""
    running = getattr(sys.modules.get("marimo"), "running_in_notebook", None)
    try:
        return bool(running()) if callable(running) else False
    except Exception:  # a marimo whose API changed: behave as outside marimo
        return False
