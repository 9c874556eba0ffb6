"""The client's export path and notes stream against a local gRPC server standing in for ingest
(a real grpc.server speaking neatroots.v1), which answers as a test scripts it: UNAVAILABLE,
RESOURCE_EXHAUSTED with or without RetryInfo, a stalled call, a refused stream.

    python -m unittest discover -s tests -p 'test_export_path.py'
"""
import contextlib
import io
import os
import queue
import subprocess
import sys
import re
import textwrap
import threading
import time
import unittest
from concurrent import futures
from unittest import mock

import grpc

import neatroots
import neatroots.client
from neatroots import DroppedEventsError, NeatrootsClient
from neatroots.v1 import ingest_pb2, ingest_pb2_grpc

MIB = 1024 * 1024


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, payload):
    if isinstance(payload, int):
        return _varint(num << 3) + _varint(payload)
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def retry_info_status(seconds, nanos=0):
    """google.rpc.Status{code: RESOURCE_EXHAUSTED, details: [RetryInfo{retry_delay}]}, encoded by hand."""
    duration = _field(1, seconds) + (_field(2, nanos) if nanos else b"")
    any_ = _field(1, b"type.googleapis.com/google.rpc.RetryInfo") + _field(2, _field(1, duration))
    return _field(1, 8) + _field(2, b"busy") + _field(3, any_)


def _close_now(client):
    """close() with its time already up, on a thread of its own: it counts what is in flight as dropped."""
    closer = threading.Thread(target=client.close, kwargs={"timeout": 0})
    closer.start()
    closer.join()


class FakeIngest(ingest_pb2_grpc.IngestServicer):
    """Answers Export with the next scripted fault (or `default`), else takes the events."""

    def __init__(self):
        self.lock = threading.Lock()
        self.faults = []
        self.default = None
        self.attempts = []  # (monotonic time, event count) of every Export call
        self.accepted = []  # ExportRequests taken
        self.subscribe = lambda request, context: iter(())
        self.subscribe_calls = []
        self.notes = lambda request: []  # the notes an export's answer brings back
        # Exports over this many bytes are refused as too large, naming `bound_named` as the bound.
        self.bound, self.bound_named = None, None
        self.reject = []  # indices every accepted export's answer says it rejected

    def Export(self, request, context):
        with self.lock:
            self.attempts.append((time.monotonic(), len(request.events)))
            fault = self.faults.pop(0) if self.faults else self.default
        if fault == "unavailable":
            context.abort(grpc.StatusCode.UNAVAILABLE, "ingest is down")
        if fault == "invalid":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad export")
        if fault == "aborted":
            context.abort(grpc.StatusCode.ABORTED, "transaction aborted, try again")
        if isinstance(fault, tuple) and fault[0] == "retry-info":
            context.set_trailing_metadata((("grpc-status-details-bin", retry_info_status(*fault[1:])),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy")
        if isinstance(fault, tuple) and fault[0] == "stall":
            time.sleep(fault[1])
            context.abort(grpc.StatusCode.UNAVAILABLE, "stalled")
        if self.bound is not None and request.ByteSize() > self.bound:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"Received message larger than max ({request.ByteSize()} vs. {self.bound_named})")
        if request.ByteSize() > 4 * MIB + 1024:  # as ingest does past its message bound
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "message larger than max")
        with self.lock:
            self.accepted.append(request)
        rejected = [ingest_pb2.Rejected(index=i, field="end_ms", reason="is before start_ms") for i in self.reject]
        return ingest_pb2.ExportResponse(accepted=len(request.events) - len(rejected), rejected=rejected, notes=self.notes(request))

    def Subscribe(self, request, context):
        with self.lock:
            self.subscribe_calls.append(time.monotonic())
        return self.subscribe(request, context)

    def events(self):
        with self.lock:
            return [e for r in self.accepted for e in r.events]


class ServerTest(unittest.TestCase):
    def setUp(self):
        self.ingest = FakeIngest()
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=16),
            options=[("grpc.max_receive_message_length", 64 * MIB)],
        )
        ingest_pb2_grpc.add_IngestServicer_to_server(self.ingest, self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()
        self.errors = []
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close(timeout=0.5)
        self.server.stop(0)

    def client(self, **kw):
        kw.setdefault("subscribe", False)
        kw.setdefault("on_error", self.errors.append)
        c = NeatrootsClient(self.address, "k", **kw)
        self.clients.append(c)
        return c

    def blocking(self, then=None):
        """A callback that, once called, blocks until `release` is set (at the test's end at the
        latest), then hands its argument to `then`: (callback, inside, release)."""
        inside, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def callback(x):
            inside.set()
            release.wait(30)
            if then is not None:
                then(x)

        return callback, inside, release

    def wait_for(self, cond, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                self.fail("timed out")
            time.sleep(0.01)

    def drops(self):
        return [e for e in self.errors if isinstance(e, DroppedEventsError)]


class ExportPathTest(ServerTest):
    def test_a_batch_is_retried_through_an_outage_until_ingest_takes_it(self):
        self.ingest.faults = ["unavailable"] * 10  # more than the 6 attempts the client used to give a batch
        client = self.client(initial_delay_s=0.01, max_delay_s=0.05)
        run = client.start_run(workflow="w")
        for i in range(3):
            run.span("tool", "t", tool="t", input={"i": i})
        client.flush()
        events = self.ingest.events()
        self.assertEqual(len(events), 4, f"{len(self.ingest.attempts)} attempts; errors {self.errors}")
        self.assertEqual(len(self.ingest.attempts), 11)
        self.assertEqual([str(e) for e in self.errors if "retrying" not in str(e)], [])
        self.assertEqual(client.stats()["dropped"], 0)

    def test_retry_info_is_waited_for_before_sending_again(self):
        self.ingest.faults = [("retry-info", 0, 600_000_000)]  # 0.6 s
        client = self.client(initial_delay_s=0.01, max_delay_s=0.05)
        client.start_run(workflow="w")
        client.flush()
        (first, _), (second, _) = self.ingest.attempts
        self.assertGreaterEqual(second - first, 0.6)
        self.assertEqual(len(self.ingest.events()), 1)

    def test_a_non_retryable_refusal_drops_that_batch_only_and_reports_it(self):
        self.ingest.faults = ["invalid"]
        client = self.client(initial_delay_s=0.01)
        run = client.start_run(workflow="w")
        client.flush()
        run.span("tool", "t", tool="t")
        client.flush()
        self.assertEqual(len(self.ingest.attempts), 2)
        self.assertEqual([e.WhichOneof("kind") for e in self.ingest.events()], ["span"])
        self.assertEqual(len(self.errors), 1)
        self.assertIn("INVALID_ARGUMENT", str(self.errors[0]))
        self.assertIn(f"(dropped: run_start of run {run.id} (", str(self.errors[0]))
        self.assertEqual(client.stats()["dropped"], 1)  # lost: counted

    def test_the_queue_keeps_the_newest_events_within_its_bound_while_ingest_refuses(self):
        self.ingest.default = "unavailable"
        client = self.client(max_batch=10, max_queue_events=50, initial_delay_s=0.02, max_delay_s=0.05)
        run = client.start_run(workflow="w")
        for i in range(9):
            run.span("tool", "t", tool="t", input={"i": i})
        self.wait_for(lambda: self.ingest.attempts)  # the first 10 are the batch being sent
        for i in range(9, 200):
            run.span("tool", "t", tool="t", input={"i": i})
        self.assertEqual(client.stats()["dropped"], 141)
        self.assertEqual(client.stats()["queued"], 60)
        # Reported at once, then at most once per 10 s.
        self.assertEqual([d.count for d in self.drops()], [1])
        self.ingest.default = None
        self.assertTrue(client.flush(10))
        spans = [int(e.span.input_json.split(": ")[1].rstrip("}")) for e in self.ingest.events() if e.HasField("span")]
        self.assertEqual(spans, list(range(9)) + list(range(150, 200)))
        client.close()
        self.assertEqual(sum(d.count for d in self.drops()), 141)

    def test_the_queue_is_bounded_by_bytes(self):
        self.ingest.default = "unavailable"
        client = self.client(max_batch=5, max_queue_bytes=200_000, initial_delay_s=0.02, max_delay_s=0.05)
        run = client.start_run(workflow="w")
        for i in range(100):
            run.span("tool", "t", tool="t", input="x" * 10_000)
        stats = client.stats()
        self.assertGreater(stats["dropped"], 70)
        self.assertLessEqual(stats["queued_bytes"], 200_000 + 5 * 10_100)
        self.assertEqual(stats["dropped"] + stats["queued"], 101)

    def test_exports_are_bounded_by_size_so_an_oversized_span_goes_alone(self):
        client = self.client()
        run = client.start_run(workflow="w")
        for _ in range(3):
            run.span("tool", "t", tool="t", input="x" * (1536 * 1024))  # 1.5 MiB each
        run.span("tool", "huge", tool="upload", input="x" * (5 * MIB))
        run.span("tool", "after", tool="t")
        run.end()
        for req in self.ingest.accepted:
            self.assertLessEqual(req.ByteSize(), 4 * MIB + 1024)
        got = [(e.WhichOneof("kind"), e.span.name) for e in self.ingest.events()]
        self.assertEqual(got, [("run_start", "")] + [("span", "t")] * 3 + [("span", "after"), ("run_end", "")])
        self.assertEqual(len(self.errors), 1, self.errors)
        self.assertIn("RESOURCE_EXHAUSTED", str(self.errors[0]))
        # Counted as dropped, named with its size.
        self.assertEqual(client.stats()["dropped"], 1)
        self.assertRegex(str(self.errors[0]), rf"^neatroots dropped 1 event\(s\): span [0-9a-f]+ of run {run.id} \(\d+ bytes\): over what ingest takes in one message \(RESOURCE_EXHAUSTED: message larger than max\); not sent again$")
        huge = [n for t, n in self.ingest.attempts if t and n == 1]
        self.assertTrue(huge, "the oversized span was not sent alone")

    def test_one_flusher_thread_however_many_events_wait(self):
        self.ingest.default = "unavailable"
        client = self.client(max_batch=10, initial_delay_s=0.05, max_delay_s=0.1)
        run = client.start_run(workflow="w")
        self.wait_for(lambda: self.ingest.attempts)  # gRPC's own threads are up (the flush interval sent run_start)
        before = threading.active_count()
        peak = before
        for i in range(3000):
            run.span("tool", "t", tool="t", input={"i": i})
            peak = max(peak, threading.active_count())
        self.assertLessEqual(peak, before + 1, "a thread was started per event")

    def test_close_gives_up_after_its_timeout_and_counts_what_it_dropped(self):
        self.ingest.faults = [("stall", 5)]
        self.ingest.default = "unavailable"
        client = self.client(max_batch=5, initial_delay_s=0.05, max_delay_s=0.1)
        run = client.start_run(workflow="w")
        for i in range(19):
            run.span("tool", "t", tool="t", input={"i": i})
        self.wait_for(lambda: self.ingest.attempts)
        started = time.monotonic()
        client.close(timeout=0.5)
        self.assertLess(time.monotonic() - started, 1.5)
        self.assertEqual(client.stats()["dropped"], 20)
        self.assertEqual([d.count for d in self.drops()], [20])

    def test_close_counts_what_it_gives_up_even_when_it_wakes_late(self):
        # close() waits for the flusher until its deadline, then counts what is left. On a loaded
        # machine it may wake a little after the deadline: the flusher, giving up at the deadline,
        # must leave the batch in flight and the queue to it, not take them and lose them uncounted.
        self.ingest.default = "unavailable"
        client = self.client(max_batch=10, initial_delay_s=0.001, max_delay_s=0.002)
        run = client.start_run(workflow="w")
        for _ in range(199):
            run.span("tool", "t", tool="t")
        self.wait_for(lambda: self.ingest.attempts)
        join = client._flusher.join
        client._flusher.join = lambda timeout=None: join(None if timeout is None else timeout + 1.0)
        client.close(timeout=0.2)
        self.assertEqual(client.stats()["dropped"], 200, self.errors)
        self.assertEqual(self.ingest.events(), [])
        self.assertIn("dropped 200 event(s)", str(self.errors[-1]))

    def test_close_at_interpreter_exit_sends_what_is_queued(self):
        script = textwrap.dedent(f"""
            from neatroots import NeatrootsClient
            client = NeatrootsClient({self.address!r}, "k", flush_interval_s=60, subscribe=False)
            run = client.start_run(workflow="w")
            run.span("tool", "t", tool="t")
        """)
        site = os.path.dirname(os.path.dirname(neatroots.__file__))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([site, os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=30)
        self.assertEqual([e.WhichOneof("kind") for e in self.ingest.events()], ["run_start", "span"])

    def test_the_default_error_report_goes_to_stderr_not_stdout(self):
        self.ingest.faults = ["invalid"]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            client = NeatrootsClient(self.address, "k", subscribe=False)
            self.clients.append(client)
            client.start_run(workflow="w")
            client.flush()
        self.assertEqual(out.getvalue(), "")
        self.assertIn("[neatroots] export of 1 event(s) failed: INVALID_ARGUMENT", err.getvalue())

    def test_a_batch_is_retried_past_a_thousand_refusals(self):
        # The backoff's 2**attempt overflowed a float at attempt 1,024 (some 4-6 hours into an
        # outage at the default delays): the batch was lost without being counted as dropped.
        self.ingest.faults = ["unavailable"] * 1100
        client = self.client(initial_delay_s=1e-9, max_delay_s=1e-6)
        run = client.start_run(workflow="w")
        run.span("tool", "t", tool="t")
        self.assertTrue(client.flush(60))
        self.assertGreater(len(self.ingest.attempts), 1100)
        self.assertEqual([e.WhichOneof("kind") for e in self.ingest.events()], ["run_start", "span"], self.errors)
        self.assertEqual([repr(e) for e in self.errors if "retrying" not in str(e)], [])
        self.assertEqual(client.stats()["dropped"], 0)

    def test_a_batch_whose_export_fails_unexpectedly_is_counted_as_dropped(self):
        # The flusher survived the exception, but the batch was lost without being counted.
        client = self.client(flush_interval_s=3600)
        run = client.start_run(workflow="w")
        run.span("tool", "lost", tool="t")
        with mock.patch.object(client, "_send", side_effect=RuntimeError("a bug in the client")):
            self.assertTrue(client.flush(10))
        self.assertEqual(client.stats()["dropped"], 2)
        self.assertEqual([str(d) for d in self.drops()], ["neatroots dropped 2 event(s): their export failed unexpectedly: RuntimeError: a bug in the client"])
        run.span("tool", "after", tool="t")
        self.assertTrue(client.flush(10))
        self.assertEqual([e.span.name for e in self.ingest.events()], ["after"])

    def test_aborted_is_retried(self):
        self.ingest.faults = ["aborted"]
        client = self.client(initial_delay_s=0.01, max_delay_s=0.05)
        client.start_run(workflow="w")
        self.assertTrue(client.flush(10))
        self.assertEqual(len(self.ingest.attempts), 2)
        self.assertEqual([e.WhichOneof("kind") for e in self.ingest.events()], ["run_start"])
        self.assertEqual([str(e) for e in self.errors if "retrying" not in str(e)], [])
        self.assertEqual(client.stats()["dropped"], 0)

    def test_an_event_over_the_queue_byte_bound_is_dropped_alone_and_named(self):
        # It used to evict every event queued before it (the run's run_start), then itself.
        client = self.client(flush_interval_s=3600, max_queue_bytes=10_000)
        run = client.start_run(workflow="w")
        run.span("tool", "before", tool="t")
        run.span("tool", "big", tool="t", attributes={"blob": "x" * 10_000})
        run.span("tool", "after", tool="t")
        self.assertTrue(client.flush(10))
        got = [(e.WhichOneof("kind"), e.span.name) for e in self.ingest.events()]
        self.assertEqual(got, [("run_start", ""), ("span", "before"), ("span", "after")])
        self.assertEqual(client.stats()["dropped"], 1)
        self.assertEqual([d.count for d in self.drops()], [1], self.errors)
        m = re.fullmatch(r"neatroots dropped 1 event\(s\): event of (\d+) bytes is larger than the queue bound of 10000 bytes \(max_queue_bytes\)", str(self.errors[0]))
        self.assertIsNotNone(m, str(self.errors[0]))
        self.assertTrue(10_000 < int(m.group(1)) < 10_200, str(self.errors[0]))

    def test_a_refusal_naming_a_bound_the_batch_was_not_over_still_lowers_the_export_size(self):
        # A hop in front of ingest counting other bytes, or naming another bound than its own: the
        # export size falls to half the refused batch, so the next batches are not refused again.
        self.ingest.bound, self.ingest.bound_named = 2000, 4 * MIB
        client = self.client()
        for _ in range(4):
            run = client.start_run(workflow="w")
            for _ in range(20):
                run.span("tool", "t", tool="t", output="x" * 300)
            client.flush()
        self.assertEqual(len(self.ingest.events()), 84)
        self.assertEqual(client.stats()["dropped"], 0)
        # Before: every batch refused and split again (4 reports, "at most 4194304 bytes from now on").
        self.assertEqual(len(self.errors), 1, f"{len(self.ingest.attempts)} exports; {self.errors}")
        m = re.match(r"^export of 21 event\(s\) \((\d+) bytes\) is over .*: sent in halves; exports hold at most (\d+) bytes from now on$", str(self.errors[0]))
        self.assertIsNotNone(m, str(self.errors[0]))
        self.assertEqual(int(m.group(2)), int(m.group(1)) // 2)

    def test_an_answer_as_close_gives_up_counts_no_event_twice(self):
        # close() gives up (and counts the batch in flight as dropped) between ingest's answer and
        # the flusher reading it: the event rejected in that answer is not counted again.
        self.ingest.reject = [1]
        client = self.client()
        export = client._stub.Export

        def closing_first(*args, **kwargs):
            res = export(*args, **kwargs)
            _close_now(client)
            return res

        client._stub.Export = closing_first
        self._send_one_span_and_wait(client)
        # run_start and the span, each counted once: by close(), which took them in flight.
        self.assertEqual(client.stats()["dropped"], 2)
        # and reported once: the rejection came for an event close() reported already.
        self._assert_each_drop_reported_once()

    def test_a_refusal_as_close_gives_up_counts_no_event_twice(self):
        # close() gives up (and counts the batch in flight as dropped) after the flusher checked
        # for close()'s abort and before it counts the export ingest refused for good: the
        # refused events are not counted again.
        self.ingest.default = "invalid"
        client = self.client()
        export = client._stub.Export

        class ClosingOnRead(grpc.RpcError):
            # The refusal, whose code, read first by the flusher after its abort check, lets
            # close(timeout=0) run then.
            def __init__(self, e):
                super().__init__()
                self.e, self.closed = e, False

            def code(self):
                if not self.closed:
                    self.closed = True
                    _close_now(client)
                return self.e.code()

            def details(self):
                return self.e.details()

            def trailing_metadata(self):
                return self.e.trailing_metadata()

        def closing_on_refusal(*args, **kwargs):
            try:
                return export(*args, **kwargs)
            except grpc.RpcError as e:
                raise ClosingOnRead(e) from e

        client._stub.Export = closing_on_refusal
        self._send_one_span_and_wait(client)
        # run_start and the span, each counted once: by close(), which took them in flight.
        self.assertEqual(client.stats()["dropped"], 2)
        # and reported once: the refusal came for events close() reported already (it was
        # reported again as 'export of 2 event(s) failed: ... (dropped: ...)').
        self._assert_each_drop_reported_once()

    def _assert_each_drop_reported_once(self):
        # close()'s one report of the 2 events it took in flight, and nothing more about them.
        self.assertEqual(len(self.errors), 1, [str(e) for e in self.errors])
        self.assertIsInstance(self.errors[0], DroppedEventsError)
        self.assertEqual(self.errors[0].count, 2)
        self.assertIn("close() gave up", str(self.errors[0]))

    def test_on_error_may_flush_and_close_the_client(self):
        # on_error was called on the flusher, so a flush() in it returned False at once (it
        # could not wait for itself) and nothing was exported while it ran.
        self.ingest.faults = ["invalid"]  # the first export (run_start) is refused for good
        returned = queue.Queue()
        client = None

        def on_error(e):
            if returned.qsize() or not str(e).startswith("export of 1 event(s) failed: INVALID_ARGUMENT"):
                return
            other = client.start_run(workflow="after")
            flushed = client.flush(timeout=10)
            returned.put(("flush", flushed, [ev.run_start.workflow for ev in self.ingest.events() if ev.HasField("run_start")]))
            client.close(timeout=5)
            returned.put(("close", other.id != ""))

        client = self.client(on_error=on_error, flush_interval_s=0.01)
        client.start_run(workflow="w")
        self.assertEqual(returned.get(timeout=20), ("flush", True, ["after"]))
        self.assertEqual(returned.get(timeout=20), ("close", True))

    def test_a_slow_on_error_holds_no_export_up(self):
        # on_error was called on the flusher, which waited for it: nothing more was exported
        # while a report was being handled.
        self.ingest.faults = ["invalid"]
        on_error, inside, release = self.blocking()
        client = self.client(on_error=on_error, flush_interval_s=0.01)
        run = client.start_run(workflow="w")  # refused: its report blocks in on_error
        self.assertTrue(inside.wait(10), "no report came")
        run.span("tool", "t", span_id="s2")
        # flush() waits for on_error too; the export is seen at ingest instead.
        self.wait_for(lambda: [e.span.span_id for e in self.ingest.events() if e.HasField("span")] == ["s2"])
        self.assertFalse(release.is_set())

    def test_reports_past_256_waiting_are_dropped_and_counted(self):
        # The reports thread keeps at most 256 waiting for on_error; the rest are counted and said.
        got = []
        on_error, inside, release = self.blocking(lambda e: got.append(str(e)))
        client = self.client(on_error=on_error, max_queue_bytes=1000)
        run = client.start_run(workflow="w")
        run.span("tool", "t", input="x" * 2000)  # over the queue bound: reported, blocks on_error
        self.assertTrue(inside.wait(10))
        for _ in range(300):
            client._report(RuntimeError("r"))
        self.assertEqual(client.stats()["reports_dropped"], 44)
        release.set()
        client.flush(timeout=10)
        self.wait_for(lambda: len(got) == 258)
        self.assertIn("neatroots dropped 44 report(s) for on_error: more than 256 were waiting for it", got[-1])

    def test_flush_and_close_wait_for_the_reports_made_before_them(self):
        # They did not wait at all while on_error was running: the wait ended as soon as it
        # saw the report being handled then still being handled.
        started, release = queue.Queue(), threading.Event()
        self.addCleanup(release.set)
        got = []

        def on_error(e):
            started.put(str(e))
            if str(e) == "blocks":
                release.wait(30)
            else:
                time.sleep(0.3)
            got.append(str(e))

        client = self.client(on_error=on_error)
        client._report(RuntimeError("first"))
        self.assertEqual(started.get(timeout=10), "first")  # on_error is running
        client._report(RuntimeError("second"))
        self.assertTrue(client.flush(timeout=10))
        self.assertEqual(got, ["first", "second"])
        self.assertEqual(started.get(timeout=10), "second")
        # Within its timeout: False when on_error did not return in time.
        client._report(RuntimeError("blocks"))
        self.assertEqual(started.get(timeout=10), "blocks")
        begun = time.monotonic()
        self.assertFalse(client.flush(timeout=0.5), "flush() said the blocked report reached on_error")
        self.assertGreaterEqual(time.monotonic() - begun, 0.45)
        release.set()
        client._report(RuntimeError("third"))
        self.assertEqual(started.get(timeout=10), "third")
        client._report(RuntimeError("fourth"))
        client.close(timeout=5)
        self.assertEqual(got, ["first", "second", "blocks", "third", "fourth"])

    def test_close_before_exit_waits_for_a_slow_on_error(self):
        # The drop report of close() never reached an on_error taking 0.1 s: close() returned
        # while it handled the outage's report, and the program exited.
        self.ingest.default = "unavailable"
        out = self._run_script(f"""
            import time
            from neatroots import NeatrootsClient

            def on_error(e):
                time.sleep(0.1)
                print("on_error:", e, flush=True)

            client = NeatrootsClient({self.address!r}, "k", subscribe=False, on_error=on_error, initial_delay_s=0.05)
            run = client.start_run(workflow="w")
            run.span("tool", "t", tool="t")
            client.close(timeout=0.5)
        """)
        self.assertIn("on_error: neatroots dropped 2 event(s): close() gave up after 0.5 s", out.stdout)

    def test_reports_are_delivered_where_no_thread_can_start(self):
        # Python 3.12+ starts no thread in an atexit handler (RuntimeError: can't create new
        # thread at interpreter shutdown): close()'s report raised out of close(), was lost, and
        # the reports thread was left set though never started, so no report came after.
        self.ingest.default = "unavailable"
        got = []
        client = self.client(on_error=lambda e: got.append((str(e), threading.current_thread().name)), initial_delay_s=0.05)
        run = client.start_run(workflow="w")
        run.span("tool", "t", tool="t")
        self.wait_for(lambda: got and client._reports_thread is None)  # the outage's report
        real_start = threading.Thread.start

        def start(thread):
            if thread.name == "neatroots-reports":
                raise RuntimeError("can't create new thread at interpreter shutdown")
            return real_start(thread)

        with mock.patch.object(threading.Thread, "start", start):
            client.close(timeout=0.2)
        self.assertEqual(got[1:], [("neatroots dropped 2 event(s): close() gave up after 0.2 s", threading.current_thread().name)])
        client._report(RuntimeError("after"))  # a thread starts again
        self.wait_for(lambda: len(got) == 3)
        self.assertEqual(got[2], ("after", "neatroots-reports"))

    def test_reports_at_interpreter_exit_reach_on_error_where_no_thread_can_start(self):
        # As Python 3.12+ at exit: the close() at exit exports, ingest refuses it for good, and
        # its report must reach on_error though no thread can start (it was lost, and "Exception
        # in thread neatroots-flush" printed).
        self.ingest.default = "invalid"
        out = self._run_script(f"""
            import atexit, threading
            from neatroots import NeatrootsClient

            client = NeatrootsClient({self.address!r}, "k", subscribe=False, flush_interval_s=60,
                                     on_error=lambda e: print("on_error:", e, flush=True))
            run = client.start_run(workflow="w")
            run.span("tool", "t", tool="t")

            def no_thread_starts(thread):
                raise RuntimeError("can't create new thread at interpreter shutdown")

            # Runs before the client's close at exit (last in, first out).
            atexit.register(setattr, threading.Thread, "start", no_thread_starts)
        """)
        self.assertIn("on_error: export of 2 event(s) failed: INVALID_ARGUMENT: bad export", out.stdout)
        self.assertNotIn("Traceback", out.stderr)
        self.assertNotIn("Exception ignored", out.stderr)
        self.assertNotIn("Exception in thread", out.stderr)

    def test_a_report_after_close_reaches_on_error_before_exit(self):
        # Recording after close() does not wait for on_error; exit gives the report a moment.
        out = self._run_script(f"""
            import time
            from neatroots import NeatrootsClient

            def on_error(e):
                time.sleep(0.2)
                print("on_error:", e, flush=True)

            client = NeatrootsClient({self.address!r}, "k", subscribe=False, on_error=on_error)
            run = client.start_run(workflow="w")
            client.close()
            run.span("tool", "late", tool="t")
        """)
        self.assertIn("on_error: neatroots dropped 1 event(s): the client is closed", out.stdout)

    def test_recording_an_event_never_waits_for_on_error(self):
        # An event over the queue bound, one recorded after close() and run.end() after it
        # waited until on_error returned: an on_error taking a lock the caller held deadlocked.
        held = threading.Lock()
        got = []

        def on_error(e):
            with held:
                got.append(str(e))

        def returns_holding_the_lock(what, call):
            def locked():
                with held:
                    call()

            caller = threading.Thread(target=locked, daemon=True)
            caller.start()
            caller.join(5)
            self.assertFalse(caller.is_alive(), f"{what} waited for an on_error waiting for the caller's lock")

        client = self.client(on_error=on_error, max_queue_bytes=1000)
        run = client.start_run(workflow="w")
        returns_holding_the_lock("an event over the queue bound", lambda: run.span("tool", "big", input="x" * 2000))
        client.close(timeout=5)
        returns_holding_the_lock("an event after close()", lambda: run.span("tool", "late"))
        returns_holding_the_lock("run.end() after close()", run.end)
        self.assertTrue(client.flush(timeout=10))
        self.assertEqual(len(got), 3, got)
        self.assertIn("is larger than the queue bound of 1000 bytes", got[0])
        self.assertEqual(got[1], "neatroots dropped 1 event(s): the client is closed")
        self.assertEqual(got[2], f"run_end of run {run.id} not sent: the client is closed")

    def test_run_end_waits_for_its_export_not_for_on_error(self):
        # run.end() flushed the client, which waited for on_error too: a blocked on_error held
        # every run.end() up for export_timeout_s.
        on_error, inside, release = self.blocking()
        client = self.client(on_error=on_error, export_timeout_s=5)
        run = client.start_run(workflow="w")
        client._report(RuntimeError("blocks"))
        self.assertTrue(inside.wait(10))
        started = time.monotonic()
        run.end()
        self.assertLess(time.monotonic() - started, 2.5, "run.end() waited for on_error")
        self.assertEqual([e.WhichOneof("kind") for e in self.ingest.events()], ["run_start", "run_end"])

    def _run_script(self, script):
        site = os.path.dirname(os.path.dirname(neatroots.__file__))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([site, os.environ.get("PYTHONPATH", "")])}
        return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, check=True, timeout=60, capture_output=True, text=True)

    def _send_one_span_and_wait(self, client):
        # run_start and one span, then the flusher's end (close() gave up during the export).
        run = client.start_run(workflow="w")
        run.span("tool", "t", tool="t")
        client._flusher.join(10)
        self.assertFalse(client._flusher.is_alive())

    def test_ending_a_run_after_close_reports_instead_of_raising(self):
        client = self.client()
        run = client.start_run(workflow="w")
        client.close()
        run.end()
        self.assertTrue(client.flush(10))  # run.end() does not wait for on_error; flush() does
        self.assertEqual(len(self.errors), 1)
        self.assertIn(f"run_end of run {run.id} not sent: the client is closed", str(self.errors[0]))


class SubscribeTest(ServerTest):
    def test_a_stream_refused_before_headers_is_not_open_and_reconnects_with_backoff(self):
        def refuse(request, context):
            context.abort(grpc.StatusCode.UNAVAILABLE, "no streams now")

        self.ingest.subscribe = refuse
        client = self.client(subscribe=True)
        run = client.start_run(workflow="w")
        self.assertFalse(run.wait_subscribed(2.5), "a refused stream counted as open")
        # 125-250 ms, 250-500 ms, 500 ms-1 s, 1-2 s: at most 5 tries in 2.5 s (10 at a flat 250 ms).
        self.assertGreaterEqual(len(self.ingest.subscribe_calls), 3)
        self.assertLessEqual(len(self.ingest.subscribe_calls), 5)
        run.end()

    def test_a_stream_that_ends_soon_after_opening_does_not_start_the_delay_over(self):
        def open_briefly(request, context):
            context.send_initial_metadata((("x-subscribed", "1"),))
            time.sleep(0.1)
            return
            yield  # a generator: headers, then the stream ends (OK) 100 ms later

        self.ingest.subscribe = open_briefly
        client = self.client(subscribe=True)
        run = client.start_run(workflow="w")
        self.assertTrue(run.wait_subscribed(2), "the stream with headers did not count as open")
        time.sleep(2.5)
        # Open under 10 s each time, so the delay keeps doubling: at most 5 streams in 2.5 s
        # (about 7 when every open stream started the delay over at 250 ms).
        self.assertLessEqual(len(self.ingest.subscribe_calls), 5)
        run.end()

    def test_a_stream_cancelled_by_the_server_is_reopened(self):
        def cancel_then_halt(request, context):
            if len(self.ingest.subscribe_calls) == 1:
                context.abort(grpc.StatusCode.CANCELLED, "cancelled by a proxy")
            context.send_initial_metadata((("x-subscribed", "1"),))
            yield ingest_pb2.Note(id="h1", run_id=request.run_id, kind="halt", check_id="stop", title="Stop")
            while context.is_active():
                time.sleep(0.05)

        self.ingest.subscribe = cancel_then_halt
        client = self.client(subscribe=True)
        run = client.start_run(workflow="w")
        self.assertTrue(run.wait_halted(5), "the stream was not reopened after a CANCELLED the client did not cause")
        self.assertTrue(run.wait_subscribed(1))
        self.assertEqual(self.errors, [])
        run.end()

    def test_the_notes_stream_is_reopened_past_a_thousand_refusals(self):
        # The reconnect delay's 2**attempt overflowed a float at attempt 1,024: the notes thread
        # died for good and no later halt reached the run. (The delays are made tiny here.)
        def refuse_then_halt(request, context):
            if len(self.ingest.subscribe_calls) <= 1100:
                context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
            context.send_initial_metadata((("x-subscribed", "1"),))
            yield ingest_pb2.Note(id="h1", run_id=request.run_id, kind="halt", check_id="stop", title="Stop")
            while context.is_active():
                time.sleep(0.05)

        self.ingest.subscribe = refuse_then_halt
        with mock.patch.object(neatroots.client, "_STREAM_INITIAL_DELAY_S", 1e-9), mock.patch.object(neatroots.client, "_STREAM_MAX_DELAY_S", 1e-6):
            client = self.client(subscribe=True)
            run = client.start_run(workflow="w")
            self.assertTrue(run.wait_halted(60), f"not halted after {len(self.ingest.subscribe_calls)} Subscribe calls")
        self.assertGreater(len(self.ingest.subscribe_calls), 1100)
        self.assertEqual(self.errors, [])
        run.end()

    def test_an_on_error_that_raises_does_not_end_the_notes_thread(self):
        # A note callback raised, the on_error told of it raised too: that ended the notes
        # thread, and the halt after it was lost.
        listening = threading.Event()

        def note_then_halt(request, context):
            context.send_initial_metadata((("x-subscribed", "1"),))
            listening.wait(5)
            yield ingest_pb2.Note(id="n1", run_id=request.run_id, kind="note", title="advice")
            yield ingest_pb2.Note(id="h1", run_id=request.run_id, kind="halt", title="stop")
            while context.is_active():
                time.sleep(0.05)

        def on_error(e):
            self.errors.append(e)
            raise RuntimeError("the logger is down")

        seen = []

        def callback(note):
            if note.kind == "note":
                raise ValueError("a bug in the callback")
            seen.append(note.kind)

        self.ingest.subscribe = note_then_halt
        client = self.client(subscribe=True, on_error=on_error)
        run = client.start_run(workflow="w")
        run.on_note(callback)
        listening.set()
        self.assertTrue(run.wait_halted(5), "the halt after the failing callback was lost")
        self.wait_for(lambda: seen == ["halt"])  # the callbacks go on after the one that raised
        self.assertEqual([str(e) for e in self.errors], ["a bug in the callback"])
        run.end()

    def test_a_note_callback_may_end_the_run_and_flush_the_client(self):
        # Notes that come back on an export's answer were handed to the callbacks on the
        # flusher thread, where run.end() could not wait for its run_end and flush() returned
        # False at once: it cannot wait for itself.
        def halt_on_span(request):
            return [ingest_pb2.Note(id="h-" + e.span.span_id, run_id=e.span.run_id, kind="halt", title="stop") for e in request.events if e.HasField("span")]

        self.ingest.notes = halt_on_span
        client = self.client(flush_interval_s=0.01)
        run = client.start_run(workflow="w")
        returned = queue.Queue()

        def on_note(note):
            run.end()
            returned.put(("end", [e.WhichOneof("kind") for e in self.ingest.events()]))
            returned.put(("flush", client.flush(timeout=5)))

        run.on_note(on_note)
        run.span("tool", "t", span_id="s1")
        self.assertEqual(returned.get(timeout=10), ("end", ["run_start", "span", "run_end"]))
        self.assertEqual(returned.get(timeout=10), ("flush", True))
        self.assertTrue(run.halted)
        self.assertEqual(self.errors, [])

    def test_an_answer_over_four_mib_is_taken(self):
        # An export's answer larger than gRPC's default 4 MiB receive bound (its runs' notes: up
        # to 32 a run, each with its check's guidance) is taken whole. The client's own bound
        # refused it as 'Received message larger than max (X vs. 4194304)', the text of ingest
        # refusing a request as too large: the events ingest had taken were sent again in halves
        # and the notes lost.
        self.ingest.notes = lambda request: [
            ingest_pb2.Note(id=f"n-{e.span.span_id}-{i}", run_id=e.span.run_id, kind="note", title="t", text="g" * 100_000)
            for e in request.events if e.HasField("span") for i in range(32)
        ]
        client = self.client(flush_interval_s=3600)
        run = client.start_run(workflow="w")
        notes = []
        run.on_note(notes.append)
        run.span("tool", "a", span_id="a")
        run.span("tool", "b", span_id="b")
        self.assertTrue(client.flush(timeout=10))
        self.wait_for(lambda: len(notes) == 64 or self.errors)
        self.assertEqual([str(e) for e in self.errors], [])
        self.assertEqual([e.WhichOneof("kind") for e in self.ingest.events()], ["run_start", "span", "span"])
        self.assertEqual(len(notes), 64)
        self.assertEqual(client.stats()["dropped"], 0)

    def test_a_slow_note_callback_holds_no_export_up(self):
        # A callback of a note that came back on an export's answer ran on the flusher, so
        # nothing more was exported until it returned.
        self.ingest.notes = lambda request: [ingest_pb2.Note(id="n-" + e.span.span_id, run_id=e.span.run_id, kind="note", title="advice") for e in request.events if e.HasField("span")]
        client = self.client(flush_interval_s=0.01)
        run = client.start_run(workflow="w")
        on_note, inside, release = self.blocking()
        run.on_note(on_note)
        run.span("tool", "t", span_id="s1")
        self.assertTrue(inside.wait(10), "no note came back")
        run.span("tool", "t", span_id="s2")
        self.assertTrue(client.flush(timeout=10), "the span after the note was not exported while its callback ran")
        self.assertEqual([e.span.span_id for e in self.ingest.events() if e.HasField("span")], ["s1", "s2"])


class ConstructorTest(unittest.TestCase):
    def test_an_empty_address_or_api_key_is_refused_at_construction_naming_it(self):
        threads = threading.active_count()
        cases = [
            (("", "k"), "address", "empty"),
            ((None, "k"), "address", "None"),
            (("  \t", "k"), "address", "whitespace"),
            (("127.0.0.1:1", ""), "api_key", "empty"),
            (("127.0.0.1:1", None), "api_key", "None"),
            (("127.0.0.1:1", " \n"), "api_key", "whitespace"),
            (("127.0.0.1:1", b"s3cret"), "api_key", "str"),
        ]
        for args, name, why in cases:
            with self.subTest(args=args):
                with self.assertRaises(ValueError) as raised:
                    NeatrootsClient(*args, subscribe=False)
                message = str(raised.exception)
                self.assertIn(name, message)
                self.assertIn(why, message)
                self.assertNotIn("s3cret", message)  # a key is never echoed
        # Refused before anything was started (no flusher thread left behind).
        self.assertEqual(threading.active_count(), threads)
        # A usable pair still constructs.
        NeatrootsClient("127.0.0.1:1", "k", subscribe=False).close(timeout=0.1)


if __name__ == "__main__":
    unittest.main()
