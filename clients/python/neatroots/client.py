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

import atexit
import collections
import json
import os
import random
import re
import sys
import threading
import time
import uuid
import weakref
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, TypeVar

import grpc

from neatroots.v1 import ingest_pb2, ingest_pb2_grpc, spans_pb2

T = TypeVar("T")
Note = ingest_pb2.Note

# An export message holds at most this much of encoded events (an event larger on its own is sent
# alone), or ingest's lower message bound once it refused an export as larger (_batch_bytes).
MAX_BATCH_BYTES = 4 * 1024 * 1024
# Reports waiting for on_error at most; past it they are dropped and counted.
_MAX_PENDING_REPORTS = 256
# At exit, reports still waiting for on_error (made after close(), which waits for those before
# it) are waited for this long at most, for every client together.
_AT_EXIT_REPORTS_S = 1.0
# Drops are reported through on_error at most this often (with the count since the last report).
_DROP_REPORT_INTERVAL_S = 10.0
# A notes stream that stayed open this long starts its reconnect delay over.
_STREAM_STABLE_S = 10.0
# A notes stream is reopened after a delay from this doubling to the cap (with jitter).
_STREAM_INITIAL_DELAY_S = 0.25
_STREAM_MAX_DELAY_S = 30.0
# Backoff doubles at most this many times: 2**attempt past it only overflows a float (at 1,024
# attempts, hours into an outage), and the cap is reached long before.
_MAX_DOUBLINGS = 30

# Retried until accepted or the client is closed: nothing of the batch was acknowledged.
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED}
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> List[Tuple[int, Any]]:
    """The fields of a protobuf message as (number, value) pairs (varints as ints, the rest as bytes)."""
    out: List[Tuple[int, Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i : i + n], i + n
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((key >> 3, value))
    return out


def _retry_info_delay(e: grpc.RpcError) -> Optional[float]:
    """The delay of the google.rpc.RetryInfo in the error's grpc-status-details-bin (a google.rpc.Status), if any."""
    try:
        trailers = e.trailing_metadata() or ()
    except Exception:
        return None
    for key, value in trailers:
        if key != "grpc-status-details-bin" or not isinstance(value, (bytes, bytearray)):
            continue
        try:
            for num, detail in _fields(bytes(value)):
                if num != 3 or not isinstance(detail, bytes):
                    continue  # google.rpc.Status.details (repeated google.protobuf.Any)
                any_fields = dict(_fields(detail))
                if any_fields.get(1) != _RETRY_INFO.encode():
                    continue
                delay = 0.0
                for n, duration in _fields(any_fields.get(2, b"")):
                    if n == 1 and isinstance(duration, bytes):  # RetryInfo.retry_delay (google.protobuf.Duration)
                        d = dict(_fields(duration))
                        delay = d.get(1, 0) + d.get(2, 0) / 1e9
                return delay
        except (ValueError, IndexError):
            continue
    return None


# The bound in grpc's refusal of a message too large ("Received message larger than max (9437210 vs. 8388608)").
_MESSAGE_LIMIT = re.compile(r"\(\d+ vs\.? (\d+)\)")


def _describe(batch: List[Tuple[int, spans_pb2.Event, int]]) -> str:
    """A batch's event (span, run_start or run_end, and its run) and its encoded size, or for
    several events their runs and their size in all."""

    def run_of(event: spans_pb2.Event) -> str:
        kind = event.WhichOneof("kind")
        return getattr(event, kind).run_id if kind else ""

    if len(batch) == 1:
        _, event, size = batch[0]
        kind = event.WhichOneof("kind")
        if kind == "span":
            return f"span {event.span.span_id} of run {event.span.run_id} ({size} bytes)"
        if kind:
            return f"{kind} of run {run_of(event)} ({size} bytes)"
        return f"an event of {size} bytes"
    runs = {run_of(event) for _, event, _ in batch}
    size = sum(n for _, _, n in batch)
    if len(runs) == 1:
        return f"{len(batch)} events of run {next(iter(runs))} ({size} bytes)"
    return f"{len(batch)} events of {len(runs)} runs ({size} bytes)"


def _refused(batch: List[Tuple[int, spans_pb2.Event, int]], e: grpc.RpcError) -> Exception:
    """The report of a batch ingest refused for good (its events were counted as dropped). One
    over ingest's message bound names its event (or run) and its size against the bound."""
    status = f"{e.code().name}: {e.details()}"
    if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
        m = _MESSAGE_LIMIT.search(e.details() or "")
        limit = f"the {m.group(1)} bytes ingest takes in one message" if m else "what ingest takes in one message"
        return DroppedEventsError(len(batch), f"{_describe(batch)}: over {limit} ({status}); not sent again", e)
    return RuntimeError(f"export of {len(batch)} event(s) failed: {status} (dropped: {_describe(batch)})")


def _retry_delay(e: grpc.RpcError) -> Optional[float]:
    """None when the failed export must not be sent again; else the least time to wait first.

    UNAVAILABLE, DEADLINE_EXCEEDED and ABORTED are retried; RESOURCE_EXHAUSTED only when it says when
    (google.rpc.RetryInfo, ingest's back-pressure): a message over the size bound would be
    refused again every time."""
    if e.code() in _RETRYABLE:
        return 0.0
    if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return _retry_info_delay(e)
    return None


def _too_large(e: grpc.RpcError) -> bool:
    """A message over the receiver's bound: RESOURCE_EXHAUSTED without RetryInfo saying "larger than
    max" (grpc's own refusal, "Received message larger than max (X vs. Y)"). Ingest's back-pressure
    is RESOURCE_EXHAUSTED too, but with RetryInfo: retried, never split."""
    return (
        e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        and _retry_info_delay(e) is None
        and "larger than max" in (e.details() or "").lower()
    )


# A notes stream that ends with one of these is not opened again: it would fail the same way.
_FINAL = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT}


_ADDRESS_HINT = "; host:port of ingest, e.g. localhost:50051"


def _missing(value: Any) -> Optional[str]:
    """What is wrong with a required string option (never its value: it may be a key), else None."""
    if value is None:
        return "is required (it is None)"
    if not isinstance(value, str):
        return f"must be a str, not {type(value).__name__}"
    if not value:
        return "is required (it is empty)"
    if not value.strip():
        return "is required (it is only whitespace)"
    return None


def _print_error(e: Exception) -> None:
    # stderr, never stdout: an agent may speak a protocol on stdout (MCP over stdio).
    print(f"[neatroots] {e}", file=sys.stderr, flush=True)


# Every client alive, for _await_reports_at_exit.
_clients: "weakref.WeakSet[NeatrootsClient]" = weakref.WeakSet()


def _await_reports_at_exit() -> None:
    """Gives reports still waiting for on_error at exit (made after a client's close(), which
    waited for those before it: an event recorded after it) _AT_EXIT_REPORTS_S in all to reach
    it. Registered on import, so it runs after every client's own close at exit (last in, first out)."""
    until = time.monotonic() + _AT_EXIT_REPORTS_S
    for client in list(_clients):
        client._await_reports(max(0.0, until - time.monotonic()))


atexit.register(_await_reports_at_exit)


class DroppedEventsError(Exception):
    """Events that were not exported: the queue passed its bound, ingest refused them for good
    (an export over its message bound), or close() ran out of time. `error`: the refusal, if any."""

    def __init__(self, count: int, why: str, error: Optional[Exception] = None):
        self.count = count
        self.error = error
        super().__init__(f"neatroots dropped {count} event(s): {why}")


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
    """Items ingest refused one by one (the rest of the batch was accepted). They are not sent
    again, so they are counted in stats()["dropped"]; `dropped_in_all` is that count after them."""

    def __init__(self, rejected: List[ingest_pb2.Rejected], dropped_in_all: Optional[int] = None):
        self.rejected = list(rejected)
        self.dropped_in_all = dropped_in_all
        reasons = "; ".join(
            (f"span {r.span_id} of run {r.run_id}: " if r.span_id else "") + f"{r.field}: {r.reason}" for r in rejected
        )
        tail = "" if dropped_in_all is None else f" (dropped, not sent again; {dropped_in_all} dropped in all)"
        super().__init__(f"neatroots rejected {len(rejected)} item(s): {reasons}{tail}")


def _now_ms() -> float:
    return time.time() * 1000


def _json(value: Any) -> Optional[str]:
    return None if value is None else json.dumps(value, default=str)


class NeatrootsClient:
    """One gRPC channel to ingest, a bounded queue of events exported in batches by one
    background flusher, and the runs it started."""

    def __init__(
        self,
        address: str,
        api_key: str,
        *,
        credentials: Optional[grpc.ChannelCredentials] = None,
        max_batch: int = 100,
        flush_interval_s: float = 1.0,
        export_timeout_s: float = 10.0,
        max_attempts: Optional[int] = None,
        initial_delay_s: float = 0.25,
        max_delay_s: float = 30.0,
        max_queue_events: int = 10_000,
        max_queue_bytes: int = 32 * 1024 * 1024,
        subscribe: bool = True,
        on_error: Optional[Callable[[Exception], None]] = None,
    ):
        """address: host:port of ingest's neatroots.v1 API (e.g. localhost:50051); plaintext unless credentials are given.

        max_attempts is ignored (kept so existing calls still work): a retryable export is
        retried until it is accepted or the client is closed.

        Raises ValueError, naming the parameter, when address or api_key is None, empty, only
        whitespace or not a str (a key read from an unset variable would have every export and
        notes stream refused)."""
        del max_attempts
        # As the Go and TypeScript clients: checked before the flusher and the channel exist.
        for name, value in (("address", address), ("api_key", api_key)):
            why = _missing(value)
            if why:
                raise ValueError(f"NeatrootsClient: {name} {why}{_ADDRESS_HINT if name == 'address' else ''}")
        # Answers are taken whatever their size: an export's answer carries the notes of its runs
        # (up to 32 a run, each with its check's guidance) and may pass gRPC's default 4 MiB, whose
        # refusal ("Received message larger than max") reads as ingest refusing the request.
        options = [("grpc.max_receive_message_length", -1)]
        self._channel = grpc.secure_channel(address, credentials, options) if credentials else grpc.insecure_channel(address, options)
        self._stub = ingest_pb2_grpc.IngestStub(self._channel)
        self._metadata = (("x-api-key", api_key),)
        self._max_batch = max(1, max_batch)
        self._interval = flush_interval_s
        self._timeout = export_timeout_s
        self._backoff = (initial_delay_s, max_delay_s)
        self._max_events = max_queue_events
        self._max_bytes = max_queue_bytes
        self.subscribe_enabled = subscribe
        self.on_error = on_error or _print_error
        # Waiting events, oldest first: (sequence number, event, encoded size).
        self._queue: Deque[Tuple[int, spans_pb2.Event, int]] = collections.deque()
        self._queued_bytes = 0
        self._inflight: List[Tuple[int, spans_pb2.Event, int]] = []  # the batch being sent: never dropped by the bound
        # Encoded events an export holds at most: MAX_BATCH_BYTES, or ingest's lower message bound.
        self._batch_bytes = MAX_BATCH_BYTES
        self._seq = 0
        self._flush_to = 0  # events up to this sequence number are wanted out now (flush())
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the flusher waits on it
        self._progress = threading.Condition(self._lock)  # flush() and close() wait on it
        self._dropped = 0
        self._unreported = 0
        self._last_report = float("-inf")
        self._failing = False
        self._runs: Dict[str, Run] = {}
        self._closed = threading.Event()  # close() began: nothing more is queued
        self._abort = False  # close() ran out of time: the flusher stops
        self._deadline = float("inf")
        # Reports waiting for on_error, handed to it one at a time by a thread of their own (never
        # the flusher: a slow on_error holds no export up, and it may call flush() or close()).
        self._reports: Deque[Exception] = collections.deque()
        self._reports_cond = threading.Condition(threading.Lock())
        self._reports_made = 0  # reports queued so far (each one's number is its place in this count)
        self._reports_handed = 0  # of them, handed to on_error and returned
        self._reports_calling = 0  # the number of the report on_error is being called with, 0 when none
        self._reports_thread: Optional[threading.Thread] = None  # running while reports wait
        self._reports_dropped = 0  # dropped since the report saying so
        self._reports_dropped_all = 0
        self._flusher = threading.Thread(target=self._flush_loop, name="neatroots-flush", daemon=True)
        self._flusher.start()
        _clients.add(self)
        ref = weakref.ref(self)

        def at_exit() -> None:
            client = ref()
            if client is not None:
                client.close()

        self._at_exit = at_exit
        atexit.register(at_exit)

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

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Has everything queued so far exported now and waits until it is acknowledged, refused
        or dropped, and until the reports made so far were handed to on_error and it returned,
        for at most `timeout` seconds (None: no limit). Returns whether both were.

        While ingest is unavailable the events stay queued and are retried in the background,
        so with no timeout this waits until ingest takes them (or the client is closed), and
        for on_error however long it takes. Called from on_error, it does not wait for the
        reports (they wait for that very call to return)."""
        return self._flush(timeout, reports=True)

    def _flush(self, timeout: Optional[float], reports: bool) -> bool:
        if threading.current_thread() is self._flusher:
            return False  # the flusher cannot wait for itself
        until = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._seq
            self._flush_to = max(self._flush_to, target)
            self._wake.notify_all()
            done = self._progress.wait_for(lambda: self._head_seq() > target or self._abort, timeout)
        if not reports:
            return done
        # What was reported until now reaches on_error before flush() returns.
        reported = self._await_reports(None if until is None else max(0.0, until - time.monotonic()))
        return done and reported

    def stats(self) -> Dict[str, int]:
        """dropped: events not exported, as far as the client knows (queue bound, an export ingest
        refused for good, close() out of time, the batch being sent included: its export is
        cancelled unanswered, so ingest may have taken it, or queued after close); queued, queued_bytes: what waits to be exported now (the batch being sent included);
        reports_dropped: reports on_error never got (more than 256 were waiting for it)."""
        with self._lock:
            return {
                "dropped": self._dropped,
                "reports_dropped": self._reports_dropped_all,
                "queued": len(self._queue) + len(self._inflight),
                "queued_bytes": self._queued_bytes + sum(size for _, _, size in self._inflight),
            }

    def close(self, timeout: float = 10.0) -> None:
        """Exports what is queued for at most `timeout` seconds, then drops the rest (counted in
        stats()["dropped"] and reported through on_error); ends every notes stream and closes
        the channel, then waits for the reports made so far to reach on_error (within what is
        left of timeout, at least 1 s). Runs not ended stay without run_end. Also called at
        interpreter exit."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._deadline = time.monotonic() + max(0.0, timeout)
            self._wake.notify_all()
        atexit.unregister(self._at_exit)
        if threading.current_thread() is not self._flusher:
            self._flusher.join(max(0.0, timeout))
        with self._lock:
            left = len(self._queue) + len(self._inflight)
            self._abort = True
            self._queue.clear()
            self._queued_bytes = 0
            self._inflight = []
            self._wake.notify_all()
            self._progress.notify_all()
            self._dropped += left
            self._unreported += left
        self._report_drops(force=True, why=f"close() gave up after {timeout:g} s" if left else "")
        with self._lock:
            runs, self._runs = list(self._runs.values()), {}
        for run in runs:
            run._unsubscribe()
        self._channel.close()  # also ends an export still in flight
        # What was reported until now reaches on_error before close() returns (a program often
        # exits next), for a moment more when its time has run out already.
        self._await_reports(max(1.0, self._deadline - time.monotonic()))

    def __enter__(self) -> "NeatrootsClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- internals ----

    def _head_seq(self) -> float:
        """The sequence number of the oldest event not yet exported, refused or dropped (lock held)."""
        if self._inflight:
            return self._inflight[0][0]
        if self._queue:
            return self._queue[0][0]
        return float("inf")

    def _enqueue(self, event: spans_pb2.Event) -> None:
        n = event.ByteSize()
        size = 1 + (max(n, 1).bit_length() + 6) // 7 + n  # its bytes in ExportRequest.events: tag, length, event
        too_large: Optional[DroppedEventsError] = None
        with self._lock:
            if self._closed.is_set():
                self._dropped += 1
                self._unreported += 1
            elif size > self._max_bytes:
                # Alone over the bound: refused on its own, never by evicting the events before it.
                self._dropped += 1
                too_large = DroppedEventsError(1, f"event of {size} bytes is larger than the queue bound of {self._max_bytes} bytes (max_queue_bytes)")
            else:
                self._seq += 1
                self._queue.append((self._seq, event, size))
                self._queued_bytes += size
                # Past either bound the oldest waiting events go (never the batch being sent).
                while self._queue and (len(self._queue) > self._max_events or self._queued_bytes > self._max_bytes):
                    _, _, gone = self._queue.popleft()
                    self._queued_bytes -= gone
                    self._dropped += 1
                    self._unreported += 1
                    self._progress.notify_all()
                if len(self._queue) >= self._max_batch or self._queued_bytes >= self._batch_bytes:
                    self._wake.notify_all()
            unreported = self._unreported
        if too_large is not None:
            self._report(too_large)
        if unreported:
            self._report_drops()
        # Recording an event never waits for on_error (it may wait for a lock the caller holds):
        # flush() and close() do, and exit waits a moment for reports still waiting.

    def _report_drops(self, force: bool = False, why: str = "") -> None:
        """Reports the events dropped since the last report, at most once per 10 s unless forced."""
        with self._lock:
            now = time.monotonic()
            if not self._unreported or (not force and now - self._last_report < _DROP_REPORT_INTERVAL_S):
                return
            count, self._unreported, self._last_report = self._unreported, 0, now
        if not why:
            why = "the client is closed" if self._closed.is_set() else (
                f"the queue passed its bound ({self._max_events} events or {self._max_bytes} bytes) while ingest did not take them"
            )
        self._report(DroppedEventsError(count, why))

    def _report(self, e: Exception) -> None:
        """Hands e to on_error on the reports thread (started when a report comes, ended when none
        is left): never on the caller's thread, so the flusher is never held up by on_error, and
        on_error may call flush() or close(). Past _MAX_PENDING_REPORTS waiting, e is dropped and
        counted (stats()["reports_dropped"])."""
        with self._reports_cond:
            if len(self._reports) >= _MAX_PENDING_REPORTS:
                self._reports_dropped += 1
                self._reports_dropped_all += 1
                return
            self._reports.append(e)
            self._reports_made += 1
            if self._reports_thread is not None:
                return
            self._reports_thread = threading.Thread(target=self._deliver_reports, name="neatroots-reports", daemon=True)
            thread = self._reports_thread
        if not sys.is_finalizing():
            try:
                thread.start()
                return
            except RuntimeError:
                # Python 3.12+ starts no thread at interpreter shutdown (an atexit handler: the
                # close() at exit), nor any when threads run out.
                pass
        # Delivered on this thread instead: at exit nothing else is left to run them.
        with self._reports_cond:
            self._reports_thread = threading.current_thread()
        self._deliver_reports()

    def _deliver_reports(self) -> None:
        """Calls on_error with each waiting report in turn until none is left (exceptions it
        raises are ignored)."""
        with self._reports_cond:
            while self._reports:
                e = self._reports.popleft()
                self._reports_calling = self._reports_handed + 1
                self._reports_cond.release()
                try:
                    self.on_error(e)
                except Exception:
                    pass
                finally:
                    self._reports_cond.acquire()
                self._reports_handed += 1
                self._reports_calling = 0
                if self._reports_dropped and len(self._reports) < _MAX_PENDING_REPORTS:
                    self._reports.append(RuntimeError(
                        f"neatroots dropped {self._reports_dropped} report(s) for on_error: more than {_MAX_PENDING_REPORTS} were waiting for it"
                    ))
                    self._reports_made += 1
                    self._reports_dropped = 0
                self._reports_cond.notify_all()
            self._reports_thread = None
            self._reports_cond.notify_all()

    def _await_reports(self, timeout: Optional[float] = None) -> bool:
        """Waits until the reports made so far were handed to on_error and it returned, for at
        most timeout seconds (None: no limit); returns whether they were. Called on the thread
        delivering them (an on_error that calls flush() or close()), it returns True at once:
        the reports wait for that very call to return."""
        with self._reports_cond:
            if self._reports_thread is threading.current_thread():
                return True
            target = self._reports_made
            return self._reports_cond.wait_for(lambda: self._reports_handed >= target, timeout)

    def _take_batch(self) -> List[Tuple[int, spans_pb2.Event, int]]:
        """The next batch off the head of the queue: at most max_batch events and MAX_BATCH_BYTES
        of them, or one event alone when it is larger (lock held)."""
        batch: List[Tuple[int, spans_pb2.Event, int]] = []
        size = 0
        while self._queue and len(batch) < self._max_batch:
            item = self._queue[0]
            if batch and size + item[2] > self._batch_bytes:
                break
            self._queue.popleft()
            self._queued_bytes -= item[2]
            batch.append(item)
            size += item[2]
        return batch

    def _flush_loop(self) -> None:
        """The one flusher: sends a batch when it is full, flush() or close() asks, or every flush interval."""
        last = time.monotonic()
        while True:
            with self._lock:
                def due() -> bool:
                    if self._abort or (self._closed.is_set() and not self._queue):
                        return True
                    if not self._queue:
                        return False
                    return (
                        self._closed.is_set()
                        or len(self._queue) >= self._max_batch
                        or self._queued_bytes >= self._batch_bytes
                        or self._flush_to >= self._queue[0][0]
                        or time.monotonic() - last >= self._interval
                    )

                while not due():
                    wait = self._interval - (time.monotonic() - last) if self._queue else self._interval
                    self._wake.wait(max(0.001, min(wait, _DROP_REPORT_INTERVAL_S)))
                    if self._unreported:
                        break
                if self._abort or (self._closed.is_set() and not self._queue):
                    return
                batch = self._take_batch() if due() else []
                self._inflight = batch
            self._report_drops()
            if not batch:
                continue
            last = time.monotonic()
            try:
                if not self._send(batch):
                    # close() gave up: what is in flight and queued is left to it to count as
                    # dropped (taking more batches past its deadline lost them uncounted).
                    return
            except Exception as e:  # the flusher must not die; the batch is lost: counted and said
                with self._lock:
                    lost = 0 if self._abort else len(self._inflight)  # else close() counted it
                    self._dropped += lost
                    self._inflight = []
                if lost:
                    self._report(DroppedEventsError(lost, f"their export failed unexpectedly: {type(e).__name__}: {e}"))
                else:
                    self._report(e)
            with self._lock:
                self._inflight = []
                self._progress.notify_all()

    def _answered(self, part: List[Tuple[int, spans_pb2.Event, int]]) -> set:
        """Takes the events of part, answered (taken or refused), out of the batch in flight:
        close() no longer counts them as dropped (lock held). Returns the sequence numbers of
        those still there: an answer that came as close() gave up finds them counted as dropped
        already (close() took them), and must not count them again."""
        done = {seq for seq, _, _ in part}
        there = {item[0] for item in self._inflight if item[0] in done}
        self._inflight = [item for item in self._inflight if item[0] not in done]
        return there

    def _split(self, batch: List[Tuple[int, spans_pb2.Event, int]], e: grpc.RpcError, part: bool) -> bool:
        """Sends a batch of several events ingest refused as over its message bound in halves (each
        halved again while refused so; a single event over the bound is dropped as before), and
        keeps the bound the refusal named (else, or when the batch was not over it, half the batch's
        size) for the following batches.
        Said once per batch of the queue, not for every half."""
        size = sum(s for _, _, s in batch)
        m = _MESSAGE_LIMIT.search(e.details() or "")
        # A bound the refused batch was not over (a hop counting other bytes, a text naming another
        # bound) would let the next batches be refused and split again, every one: half the size then.
        bound = int(m.group(1)) if m and int(m.group(1)) < size else size // 2
        with self._lock:
            self._batch_bytes = max(1, min(self._batch_bytes, bound))
            bound = self._batch_bytes
        if not part:
            self._report(
                RuntimeError(
                    f"export of {len(batch)} event(s) ({size} bytes) is over what ingest takes in one message "
                    f"({e.code().name}: {e.details()}): sent in halves; exports hold at most {bound} bytes from now on"
                )
            )
        half = (len(batch) + 1) // 2
        return self._send(batch[:half], part=True) and self._send(batch[half:], part=True)

    def _send(self, batch: List[Tuple[int, spans_pb2.Event, int]], part: bool = False) -> bool:
        """Exports one batch (or a part of it): retried with backoff until accepted or the client
        is closed, unless refused for good; sent in halves when over ingest's message bound.
        False when close() gave up first: what is still in flight is close()'s to count."""
        initial, cap = self._backoff
        request = ingest_pb2.ExportRequest(events=[event for _, event, _ in batch])
        attempt = 0
        while True:
            timeout = self._timeout
            if self._closed.is_set():
                timeout = min(timeout, self._deadline - time.monotonic())
                if timeout <= 0:
                    return False  # close() drops it
            try:
                res = self._stub.Export(request, metadata=self._metadata, timeout=timeout)
            except (grpc.RpcError, ValueError) as e:  # ValueError: the channel was closed under it
                if self._abort:
                    return False
                if not isinstance(e, grpc.RpcError):
                    raise
                least = _retry_delay(e)
                if least is None and len(batch) > 1 and _too_large(e):
                    return self._split(batch, e, part)
                if least is None:
                    # Refused for good (sent again it would be refused alike): lost, so counted
                    # and reported, but only what is still in flight (not what close(), giving up
                    # since the abort check above, counted and reported already).
                    with self._lock:
                        there = self._answered(batch)
                        self._dropped += len(there)
                    lost = [item for item in batch if item[0] in there]
                    if lost:
                        self._report(_refused(lost, e))
                    return True
                if not self._failing:
                    self._failing = True
                    self._report(RuntimeError(f"export of {len(batch)} event(s) failed: {e.code().name}: {e.details()}; retrying until ingest takes it"))
                # Full jitter on 250 ms doubling to the cap; never sooner than ingest asked.
                delay = max(least, random.uniform(0, min(cap, initial * 2 ** min(attempt, _MAX_DOUBLINGS))))
                attempt += 1
                with self._lock:
                    if self._wake.wait_for(lambda: self._abort, delay):
                        return False
                self._report_drops()
                continue
            self._failing = False
            # Refused one by one, each for good: lost, so counted as dropped and reported (once per
            # event of the batch, and not when close() counted and reported it already).
            with self._lock:
                there = self._answered(batch)
                rejected = [r for r in res.rejected if not (0 <= r.index < len(batch)) or batch[r.index][0] in there]
                self._dropped += len({r.index for r in rejected if 0 <= r.index < len(batch)})
                in_all = self._dropped
            if rejected:
                self._report(ExportRejectedError(rejected, in_all))
            for note in res.notes:
                self._dispatch(note)
            return True

    def _forget(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

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
        # Notes whose callbacks are still to be called, oldest first, each with the callbacks
        # registered when it came; a delivery thread calls them while there are any.
        self._pending: Deque[Tuple[Note, List[Callable[[Note], None]]]] = collections.deque()
        self._delivering = False

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
        """Calls `callback` for every note and halt of the run (each once, whichever way it came),
        in the order they came, on a thread of the run's own: never the flusher (notes come back
        on export answers) nor the notes stream's, so it may end the run, flush or close the
        client, and a slow one holds no export up. A halt stops the run (`halted`) before any
        callback is called. Returns an unsubscribe."""
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
        """Sends run_end (status: `interrupted` when halted, else `ok`, unless given), closes the
        notes stream and waits for the export at most export_timeout_s (while ingest is
        unavailable the events stay queued and are retried in the background), not for on_error.
        Idempotent. After client.close() it sends nothing and reports that through on_error."""
        if self._ended:
            return
        self._ended = True
        if self._client._closed.is_set():
            self._unsubscribe()
            self._client._report(RuntimeError(f"run_end of run {self.id} not sent: the client is closed"))
            return
        msg = spans_pb2.RunEnd(run_id=self.id, status=status or ("interrupted" if self.halted else "ok"), ts_ms=_now_ms())
        out = _json(final_output)
        if out is not None:
            msg.final_output_json = out
        self._client._enqueue(spans_pb2.Event(run_end=msg))
        self._unsubscribe()
        self._client._flush(self._client._timeout, reports=False)  # the export only, not on_error
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
            if not self._listeners:
                return
            self._pending.append((note, list(self._listeners)))
            if self._delivering:
                return
            self._delivering = True
        threading.Thread(target=self._deliver, name=f"neatroots-note-callbacks-{self.id}", daemon=True).start()

    def _deliver(self) -> None:
        """Calls the note callbacks in the order the notes came, until none is left (the thread
        then ends): off the flusher and the notes stream, so a callback may flush or end the run."""
        while True:
            with self._lock:
                if not self._pending:
                    self._delivering = False
                    return
                note, listeners = self._pending.popleft()
            for callback in listeners:
                try:
                    callback(note)
                except Exception as e:
                    self._client._report(e)  # an on_error that raises must not end the delivery

    def _subscribe(self) -> None:
        threading.Thread(target=self._listen, name=f"neatroots-notes-{self.id}", daemon=True).start()

    def _listen(self) -> None:
        """Keeps the run's Subscribe stream open until the run ends or the client closes,
        reopening it after any end this client did not cause, with backoff."""
        attempt = 0
        while not self._stopping():
            try:
                call = self._client._stub.Subscribe(ingest_pb2.SubscribeRequest(run_id=self.id), metadata=self._client._metadata)
            except ValueError:  # the channel is closed
                return
            self._call = call
            if self._stopping():
                call.cancel()
                return
            opened: Optional[float] = None
            ended = threading.Event()
            call.add_done_callback(lambda _: ended.set())
            try:
                # grpcio returns empty headers, without raising, for a call that failed before
                # any: the stream is open only with headers that say something, with a first
                # note, or when it is still going a moment after empty headers.
                headers = call.initial_metadata()
                if headers or not ended.wait(0.2):
                    opened = time.monotonic()
                    self._subscribed.set()
                for note in call:
                    if opened is None:
                        opened = time.monotonic()
                        self._subscribed.set()
                    self._receive(note)
            except grpc.RpcError as e:
                if self._stopping():
                    return
                if e.code() in _FINAL:
                    self._client._report(RuntimeError(f"notes for run {self.id} unavailable: {e.code().name}: {e.details()}"))
                    return
            except ValueError:
                if self._stopping():
                    return
            self._subscribed.clear()
            if self._stopping():
                return
            if opened is not None and time.monotonic() - opened >= _STREAM_STABLE_S:
                attempt = 0
            base = min(_STREAM_MAX_DELAY_S, _STREAM_INITIAL_DELAY_S * 2 ** min(attempt, _MAX_DOUBLINGS))
            attempt += 1
            self._stopped.wait(base / 2 + random.random() * base / 2)

    def _stopping(self) -> bool:
        """Whether the run or the client ended the stream (a CANCELLED it did not cause is reopened)."""
        return self._stopped.is_set() or self._client._closed.is_set()

    def _unsubscribe(self) -> None:
        self._stopped.set()
        if self._call is not None:
            self._call.cancel()
