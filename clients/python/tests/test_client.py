"""The Python client against a running neatroots (the embedded deployment, booted by
test/clients/python.integration.spec.ts), whose checks note a repeated tool call and halt a
refund made without a lookup first.

    NEATROOTS_ADDRESS=127.0.0.1:50051 NEATROOTS_API_KEY=... python -m unittest discover -s tests
"""
import os
import re
import time
import unittest

from neatroots import DroppedEventsError, NeatrootsClient, RunHaltedError

ADDRESS = os.environ["NEATROOTS_ADDRESS"]
API_KEY = os.environ["NEATROOTS_API_KEY"]


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.errors = []
        self.client = NeatrootsClient(ADDRESS, API_KEY, flush_interval_s=0.02, on_error=self.errors.append)

    def tearDown(self):
        self.client.close()

    def test_a_note_reaches_the_run(self):
        run = self.client.start_run(workflow="support-agent", user_message="reset my password")
        self.assertTrue(run.wait_subscribed(10), "the notes stream did not open")
        notes = []
        run.on_note(notes.append)
        for _ in range(3):
            run.tool_call("search_kb", {"query": "reset password"}, lambda args: {"results": []})
        run.flush()
        deadline = time.time() + 10
        while not any(n.check_id == "repeated-tool-call" for n in notes) and time.time() < deadline:
            time.sleep(0.02)
        note = next((n for n in notes if n.check_id == "repeated-tool-call"), None)
        self.assertIsNotNone(note, f"no repeated-tool-call note; got {[n.check_id for n in notes]}")
        self.assertEqual(note.kind, "note")
        self.assertIn("search_kb", note.text)
        self.assertFalse(run.halted)
        run.end(final_output="sent the reset link")
        self.assertEqual(self.errors, [])

    def test_a_halt_stops_the_next_tool_call(self):
        run = self.client.start_run(workflow="support-agent")
        self.assertTrue(run.wait_subscribed(10), "the notes stream did not open")
        run.tool_call("issue_refund", {"order_id": "A1", "amount": 80}, lambda args: {"ok": True})
        run.flush()
        self.assertTrue(run.wait_halted(10), "no halt arrived")
        self.assertEqual(run.halt_note.check_id, "refund-without-lookup")
        self.assertEqual(run.halt_note.text, "Stop. Call lookup_order before issue_refund.")
        called = []
        with self.assertRaises(RunHaltedError):
            run.tool_call("issue_refund", {"order_id": "A2"}, lambda args: called.append(args))
        self.assertEqual(called, [], "the tool ran after the halt")
        run.end()
        self.assertEqual(self.errors, [])


    def test_an_export_over_the_size_bound_is_refused_once_not_retried(self):
        errors = []
        client = NeatrootsClient(ADDRESS, API_KEY, flush_interval_s=0.02, initial_delay_s=2.0, max_delay_s=2.0, subscribe=False, on_error=errors.append)
        try:
            run = client.start_run(workflow="support-agent")
            started = time.time()
            run.span(type="tool", tool="upload", span_id="big", input="x" * (9 * 1024 * 1024))  # over ingest's 8 MiB
            run.flush()
            self.assertEqual(len(errors), 1, errors)
            self.assertIn("RESOURCE_EXHAUSTED", str(errors[0]))
            self.assertLess(time.time() - started, 1.5, "it waited to send it again")
            # Counted as dropped and reported once, naming the span, its run, its size and the bound.
            self.assertEqual(client.stats()["dropped"], 1)
            self.assertIsInstance(errors[0], DroppedEventsError)
            m = re.match(rf"neatroots dropped 1 event\(s\): span big of run {run.id} \((\d+) bytes\): over the 8388608 bytes ingest takes in one message \(", str(errors[0]))
            self.assertTrue(m, str(errors[0]))
            self.assertTrue(9 * 1024 * 1024 < int(m.group(1)) < 9 * 1024 * 1024 + 200, str(errors[0]))
        finally:
            client.close()

    def test_a_span_over_the_item_bound_is_counted_as_dropped(self):
        # Within ingest's message bound but over its bound for one item (NEATROOTS_MAX_ITEM_CHARS,
        # 4 Mi characters): refused alone, counted and named with its size.
        errors = []
        client = NeatrootsClient(ADDRESS, API_KEY, flush_interval_s=0.02, subscribe=False, on_error=errors.append)
        try:
            run = client.start_run(workflow="support-agent")
            run.flush()
            run.span(type="tool", tool="upload", span_id="large", input="x" * (5 * 1024 * 1024))
            run.flush()
            self.assertEqual(client.stats()["dropped"], 1)
            self.assertEqual(len(errors), 1, errors)
            for want in ("INVALID_ARGUMENT", "4194304", f"(dropped: span large of run {run.id} ("):
                self.assertIn(want, str(errors[0]))
        finally:
            client.close()
    def test_a_span_rejected_inside_an_accepted_export_is_counted_as_dropped(self):
        # Ingest accepts the export but rejects one span on its own (its end before its start):
        # it is not sent again, so it is counted as dropped and reported naming it; the rest is kept.
        from neatroots import ExportRejectedError

        errors = []
        client = NeatrootsClient(ADDRESS, API_KEY, flush_interval_s=60, subscribe=False, on_error=errors.append)
        try:
            run = client.start_run(workflow="support-agent")
            now = time.time() * 1000
            run.span(type="tool", tool="lookup", span_id="fine")
            run.span(type="tool", tool="refund", span_id="backwards", start_ms=now, end_ms=now - 1000)
            run.flush()
            self.assertEqual(client.stats()["dropped"], 1)
            self.assertEqual(len(errors), 1, errors)
            self.assertIsInstance(errors[0], ExportRejectedError)
            self.assertEqual([r.span_id for r in errors[0].rejected], ["backwards"])
            self.assertEqual(errors[0].dropped_in_all, 1)
            self.assertTrue(str(errors[0]).startswith(f"neatroots rejected 1 item(s): span backwards of run {run.id}: end_ms: is before start_ms ("), str(errors[0]))
            self.assertTrue(str(errors[0]).endswith(" (dropped, not sent again; 1 dropped in all)"), str(errors[0]))
        finally:
            client.close()

    def test_a_batch_over_a_lower_message_bound_is_sent_in_halves(self):
        # Against a neatroots taking at most 64 KiB in one message (NEATROOTS_MAX_MESSAGE_BYTES),
        # below the 4 MiB the client fills exports to: the batch is sent in halves down to the one
        # span over the bound alone (dropped), and the bound is kept for the next batches.
        address = os.environ["NEATROOTS_SMALL_ADDRESS"]
        errors = []
        client = NeatrootsClient(address, API_KEY, flush_interval_s=60, subscribe=False, on_error=errors.append)
        try:
            # One batch of about 340 KB: run_start, 30 spans of 8 KB and one of 100 KB.
            run = client.start_run(workflow="support-agent")
            for i in range(30):
                run.span(type="tool", tool="lookup", output="x" * 8000)
                if i == 20:
                    run.span(type="tool", tool="upload", span_id="huge", output="x" * 100_000)
            run.flush()
            # Without the split: dropped 32 (the whole batch), one report.
            self.assertEqual(client.stats()["dropped"], 1, errors)
            self.assertEqual(len(errors), 2, errors)
            self.assertRegex(
                str(errors[0]),
                r"^export of 32 event\(s\) \(\d+ bytes\) is over what ingest takes in one message \(RESOURCE_EXHAUSTED: .*larger than max \(\d+ vs\.? 65536\)\): sent in halves; exports hold at most 65536 bytes from now on$",
            )
            self.assertIsInstance(errors[1], DroppedEventsError)
            self.assertTrue(str(errors[1]).startswith(f"neatroots dropped 1 event(s): span huge of run {run.id} ("), str(errors[1]))
            self.assertIn("over the 65536 bytes ingest takes in one message", str(errors[1]))
            # The bound is kept: the next run's batch goes in parts within it, none refused.
            following = client.start_run(workflow="support-agent")
            for _ in range(30):
                following.span(type="tool", tool="lookup", output="x" * 8000)
            following.flush()
            self.assertEqual(client.stats()["dropped"], 1, errors)
            self.assertEqual(len(errors), 2, errors)
        finally:
            client.close()


if __name__ == "__main__":
    unittest.main()
