"""The neatroots agent client for Python, the same shape as the TypeScript SDK (@neatroots/sdk).

It records a run's spans and run events, exports them in batches to ingest's neatroots.v1
Ingest API (gRPC), and receives notes and halts for the run: a Subscribe stream per run, and
notes piggybacked on export responses.

    client = NeatrootsClient("localhost:50051", api_key)
    run = client.start_run(workflow="refund-agent", user_message=text)
    order = run.tool_call("lookup_order", {"id": 7}, lambda args: lookup(args))
    run.end(final_output=answer)
    client.close()

Everything on the wire comes from the code generated from proto/ (neatroots.v1).
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, TypeVar

import grpc

from neatroots.v1 import ingest_pb2, ingest_pb2_grpc, spans_pb2

T = TypeVar("T")
Note = ingest_pb2.Note

# Retried: nothing of the batch was acknowledged.
_RETRYABLE = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
}


def _retryable(e: grpc.RpcError) -> bool:
    """RESOURCE_EXHAUSTED is retried when it says when to try again (google.rpc.RetryInfo in
    grpc-status-details-bin: ingest's back-pressure), not otherwise: a message over the size
    bound would be refused again every time."""
    if e.code() in _RETRYABLE:
        return True
    if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return False
    trailers = e.trailing_metadata() or ()
    return any(k == "grpc-status-details-bin" for k, _ in trailers)
# A notes stream that ends with one of these is not opened again: it would fail the same way.
_FINAL = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT}


class RunHaltedError(Exception):
    """Raised by tool_call once the run was halted; `note` is the halt."""

    def __init__(self, note: Optional[Note] = None):
        self.note = note
        if note is None:
            super().__init__("run halted by neatroots")
        else:
            text = f": {note.text}" if note.text else ""
            super().__init__(f"run halted by neatroots: {note.title or note.check_id}{text}")


class ExportRejectedError(Exception):
    """Items ingest refused (the rest of the batch was accepted)."""

    def __init__(self, rejected: List[ingest_pb2.Rejected]):
        self.rejected = list(rejected)
        reasons = "; ".join(f"{r.field}: {r.reason}" for r in rejected)
        super().__init__(f"neatroots rejected {len(rejected)} item(s): {reasons}")


def _now_ms() -> float:
    return time.time() * 1000


def _json(value: Any) -> Optional[str]:
    return None if value is None else json.dumps(value, default=str)


class NeatrootsClient:
    """One gRPC channel to ingest, a queue of events exported in batches, and the runs it started."""

    def __init__(
        self,
        address: str,
        api_key: str,
        *,
        credentials: Optional[grpc.ChannelCredentials] = None,
        max_batch: int = 100,
        flush_interval_s: float = 1.0,
        export_timeout_s: float = 10.0,
        max_attempts: int = 6,
        initial_delay_s: float = 0.2,
        max_delay_s: float = 5.0,
        subscribe: bool = True,
        on_error: Optional[Callable[[Exception], None]] = None,
    ):
        """address: host:port of ingest's neatroots.v1 API (e.g. localhost:50051); plaintext unless credentials are given."""
        self._channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
        self._stub = ingest_pb2_grpc.IngestStub(self._channel)
        self._metadata = (("x-api-key", api_key),)
        self._max_batch = max_batch
        self._timeout = export_timeout_s
        self._retry = (max_attempts, initial_delay_s, max_delay_s)
        self.subscribe_enabled = subscribe
        self.on_error = on_error or (lambda e: print(f"[neatroots] {e}"))
        self._queue: List[spans_pb2.Event] = []
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._runs: Dict[str, Run] = {}
        self._closed = threading.Event()
        self._timer = threading.Thread(target=self._tick, args=(flush_interval_s,), name="neatroots-flush", daemon=True)
        self._timer.start()

    def start_run(
        self,
        run_id: Optional[str] = None,
        *,
        workflow: str = "",
        session_id: str = "",
        system_prompt: str = "",
        user_message: str = "",
        tools: Optional[List[Dict[str, str]]] = None,
    ) -> "Run":
        """Sends run_start and, unless subscribe=False, opens the run's notes stream."""
        if self._closed.is_set():
            raise RuntimeError("NeatrootsClient is closed")
        run_id = run_id or str(uuid.uuid4())
        run = Run(self, run_id)
        with self._lock:
            self._runs[run_id] = run
        start = spans_pb2.RunStart(
            run_id=run_id, workflow=workflow, session_id=session_id, system_prompt=system_prompt,
            user_message=user_message, ts_ms=_now_ms(),
            tools=[spans_pb2.ToolInfo(name=t["name"], description=t.get("description", "")) for t in tools or []],
        )
        self._enqueue(spans_pb2.Event(run_start=start))
        if self.subscribe_enabled:
            run._subscribe()
        return run

    def flush(self) -> None:
        """Exports everything queued so far; returns when it is acknowledged (or given up on)."""
        with self._flush_lock:
            while True:
                with self._lock:
                    batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
                if not batch:
                    return
                self._export_with_retry(batch)

    def close(self) -> None:
        """Flushes, ends every notes stream and closes the channel. Runs not ended stay without run_end."""
        if self._closed.is_set():
            return
        self._closed.set()
        self.flush()
        with self._lock:
            runs, self._runs = list(self._runs.values()), {}
        for run in runs:
            run._unsubscribe()
        self._channel.close()

    def __enter__(self) -> "NeatrootsClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- internals ----

    def _tick(self, interval: float) -> None:
        while not self._closed.wait(interval):
            if self._queue:
                try:
                    self.flush()
                except Exception as e:  # a background flush must not kill the thread
                    self.on_error(e)

    def _enqueue(self, event: spans_pb2.Event) -> None:
        with self._lock:
            self._queue.append(event)
            full = len(self._queue) >= self._max_batch
        if full:
            threading.Thread(target=self.flush, daemon=True).start()

    def _forget(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def _export_with_retry(self, events: List[spans_pb2.Event]) -> None:
        max_attempts, initial, max_delay = self._retry
        request = ingest_pb2.ExportRequest(events=events)
        for attempt in range(1, max_attempts + 1):
            try:
                res = self._stub.Export(request, metadata=self._metadata, timeout=self._timeout)
            except grpc.RpcError as e:
                if not _retryable(e) or attempt >= max_attempts:
                    self.on_error(RuntimeError(f"export of {len(events)} event(s) failed: {e.code().name}: {e.details()}"))
                    return
                base = min(max_delay, initial * 2 ** (attempt - 1))
                time.sleep(base / 2 + random.random() * base / 2)
                continue
            if res.rejected:
                self.on_error(ExportRejectedError(res.rejected))
            for note in res.notes:
                self._dispatch(note)
            return

    def _dispatch(self, note: Note) -> None:
        with self._lock:
            runs = [self._runs[note.run_id]] if note.run_id in self._runs else ([] if note.run_id else list(self._runs.values()))
        for run in runs:
            run._receive(note)


class Run:
    """One agent run: its spans, its notes and halts."""

    def __init__(self, client: NeatrootsClient, run_id: str):
        self._client = client
        self.id = run_id
        self._listeners: List[Callable[[Note], None]] = []
        self._seen: set = set()
        self._lock = threading.Lock()
        self._halted = threading.Event()
        self._halt_note: Optional[Note] = None
        self._subscribed = threading.Event()
        self._stopped = threading.Event()
        self._call: Any = None
        self._ended = False

    @property
    def halted(self) -> bool:
        """True once a halt reached the run."""
        return self._halted.is_set()

    @property
    def halt_note(self) -> Optional[Note]:
        """The halt that stopped the run, if any."""
        return self._halt_note

    def wait_subscribed(self, timeout: Optional[float] = None) -> bool:
        """Waits until the notes stream is open (halts can reach the run from then on)."""
        return self._subscribed.wait(timeout)

    def wait_halted(self, timeout: Optional[float] = None) -> bool:
        """Waits until the run is halted (or the timeout passes); returns whether it was."""
        return self._halted.wait(timeout)

    def on_note(self, callback: Callable[[Note], None]) -> Callable[[], None]:
        """Calls `callback` for every note and halt of the run (each once, whichever way it came). Returns an unsubscribe."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback)

    def span(
        self,
        type: str,
        name: str = "",
        *,
        tool: str = "",
        input: Any = None,
        output: Any = None,
        error: Optional[str] = None,
        status: str = "",
        start_ms: Optional[float] = None,
        end_ms: Optional[float] = None,
        usage: Optional[Dict[str, float]] = None,
        model: str = "",
        parent_id: str = "",
        span_id: Optional[str] = None,
        attributes: Optional[Dict[str, Any]] = None,
    ) -> str:
        """Records a finished span (type: llm, tool, mcp_tool, retrieval, agent, ...); returns its span_id."""
        span_id = span_id or os.urandom(8).hex()
        now = _now_ms()
        start = start_ms if start_ms is not None else now
        msg = spans_pb2.Span(
            run_id=self.id, span_id=span_id, parent_id=parent_id, type=type, name=name, tool=tool,
            status=status, model=model, start_ms=start, end_ms=end_ms if end_ms is not None else start,
        )
        for field, value in (("input_json", _json(input)), ("output_json", _json(output)), ("attributes_json", _json(attributes))):
            if value is not None:
                setattr(msg, field, value)
        if error is not None:
            msg.error = error
        if usage:
            msg.usage.CopyFrom(spans_pb2.Usage(**usage))
        self._client._enqueue(spans_pb2.Event(span=msg))
        return span_id

    def tool_call(self, name: str, input: Any, fn: Callable[[Any], T], *, type: str = "tool", parent_id: str = "") -> T:
        """Runs a tool and records it as a `tool` span (input, output or error, timing).

        Raises RunHaltedError without calling `fn` once the run is halted.
        """
        if self.halted:
            raise RunHaltedError(self._halt_note)
        start = _now_ms()
        try:
            out = fn(input)
        except Exception as e:
            self.span(type, name, tool=name, input=input, error=str(e), status="error", start_ms=start, end_ms=_now_ms(), parent_id=parent_id)
            raise
        self.span(type, name, tool=name, input=input, output=out, start_ms=start, end_ms=_now_ms(), parent_id=parent_id)
        return out

    def flush(self) -> None:
        """Exports this run's spans queued so far (and everything else queued on the client)."""
        self._client.flush()

    def end(self, status: Optional[str] = None, final_output: Any = None) -> None:
        """Sends run_end (status: `interrupted` when halted, else `ok`, unless given), flushes, closes the notes stream. Idempotent."""
        if self._ended:
            return
        self._ended = True
        msg = spans_pb2.RunEnd(run_id=self.id, status=status or ("interrupted" if self.halted else "ok"), ts_ms=_now_ms())
        out = _json(final_output)
        if out is not None:
            msg.final_output_json = out
        self._client._enqueue(spans_pb2.Event(run_end=msg))
        self._client.flush()
        self._unsubscribe()
        self._client._forget(self.id)

    # ---- internals ----

    def _receive(self, note: Note) -> None:
        with self._lock:
            if note.id in self._seen:
                return
            self._seen.add(note.id)
            if note.kind == "halt" and not self._halted.is_set():
                self._halt_note = note
                self._halted.set()
        for callback in list(self._listeners):
            try:
                callback(note)
            except Exception as e:
                self._client.on_error(e)

    def _subscribe(self) -> None:
        threading.Thread(target=self._listen, name=f"neatroots-notes-{self.id}", daemon=True).start()

    def _listen(self) -> None:
        """Keeps the run's Subscribe stream open until the run ends, reopening it with backoff."""
        delay = 0.0
        while not self._stopped.is_set():
            call = self._client._stub.Subscribe(ingest_pb2.SubscribeRequest(run_id=self.id), metadata=self._client._metadata)
            self._call = call
            if self._stopped.is_set():
                call.cancel()
                return
            try:
                call.initial_metadata()  # ingest sends headers once the subscription is in place
                self._subscribed.set()
                delay = 0.0
                for note in call:
                    self._receive(note)
            except grpc.RpcError as e:
                if self._stopped.is_set() or e.code() == grpc.StatusCode.CANCELLED:
                    return
                if e.code() in _FINAL:
                    self._client.on_error(RuntimeError(f"notes for run {self.id} unavailable: {e.details()}"))
                    return
            delay = min(10.0, delay * 2 if delay else 0.25)
            self._stopped.wait(delay)

    def _unsubscribe(self) -> None:
        self._stopped.set()
        if self._call is not None:
            self._call.cancel()
