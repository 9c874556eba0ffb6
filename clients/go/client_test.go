package neatroots_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	neatroots "github.com/neatroots/neatroots/clients/go"
)

// Against a running neatroots (the embedded deployment, booted by
// test/clients/go.integration.spec.ts), whose checks note a repeated tool call and halt a
// refund made without a lookup first:
//
//	NEATROOTS_ADDRESS=127.0.0.1:50051 NEATROOTS_API_KEY=... go test ./...
func client(t *testing.T) (*neatroots.Client, *[]error) {
	t.Helper()
	addr, key := os.Getenv("NEATROOTS_ADDRESS"), os.Getenv("NEATROOTS_API_KEY")
	if addr == "" || key == "" {
		t.Skip("NEATROOTS_ADDRESS and NEATROOTS_API_KEY name a running neatroots")
	}
	var mu sync.Mutex
	errs := []error{}
	c, err := neatroots.New(neatroots.Options{Address: addr, APIKey: key, FlushInterval: 20 * time.Millisecond, OnError: func(e error) {
		mu.Lock()
		errs = append(errs, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, &errs
}

func subscribed(t *testing.T, run *neatroots.Run) {
	t.Helper()
	select {
	case <-run.Subscribed():
	case <-time.After(10 * time.Second):
		t.Fatal("the notes stream did not open")
	}
}

func TestANoteReachesTheRun(t *testing.T) {
	c, errs := client(t)
	run := c.StartRun(neatroots.RunOptions{Workflow: "support-agent", UserMessage: "reset my password"})
	subscribed(t, run)
	notes := make(chan *neatroots.Note, 16)
	run.OnNote(func(n *neatroots.Note) { notes <- n })
	for i := 0; i < 3; i++ {
		if _, err := run.ToolCall("search_kb", map[string]any{"query": "reset password"}, func(context.Context) (any, error) {
			return map[string]any{"results": []any{}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	run.Flush()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-notes:
			if n.CheckId != "repeated-tool-call" {
				continue
			}
			if n.Kind != "note" || !strings.Contains(n.Text, "search_kb") {
				t.Fatalf("unexpected note %+v", n)
			}
			if run.Halted() {
				t.Fatal("a note halted the run")
			}
			run.End(neatroots.EndOptions{FinalOutput: "sent the reset link"})
			if len(*errs) > 0 {
				t.Fatalf("errors: %v", *errs)
			}
			return
		case <-deadline:
			t.Fatal("no repeated-tool-call note")
		}
	}
}

func TestAHaltStopsTheNextToolCall(t *testing.T) {
	c, errs := client(t)
	run := c.StartRun(neatroots.RunOptions{Workflow: "support-agent"})
	subscribed(t, run)
	if _, err := run.ToolCall("issue_refund", map[string]any{"order_id": "A1", "amount": 80}, func(context.Context) (any, error) {
		return map[string]any{"ok": true}, nil
	}); err != nil {
		t.Fatal(err)
	}
	run.Flush()
	select {
	case <-run.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no halt arrived")
	}
	halt := run.HaltNote()
	if halt == nil || halt.CheckId != "refund-without-lookup" || halt.Text != "Stop. Call lookup_order before issue_refund." {
		t.Fatalf("unexpected halt %+v", halt)
	}
	var cause *neatroots.RunHaltedError
	if !errors.As(context.Cause(run.Context()), &cause) {
		t.Fatalf("the run's context was not cancelled by the halt: %v", context.Cause(run.Context()))
	}
	called := false
	_, err := run.ToolCall("issue_refund", map[string]any{"order_id": "A2"}, func(context.Context) (any, error) {
		called = true
		return nil, nil
	})
	if !errors.As(err, &cause) || called {
		t.Fatalf("the tool call after the halt: err %v, called %v", err, called)
	}
	run.End(neatroots.EndOptions{})
	if len(*errs) > 0 {
		t.Fatalf("errors: %v", *errs)
	}
}

func TestAnExportOverTheSizeBoundIsRefusedOnceNotRetried(t *testing.T) {
	c, errs := client(t)
	run := c.StartRun(neatroots.RunOptions{Workflow: "support-agent"})
	started := time.Now()
	run.Span(neatroots.SpanInit{Type: "tool", Tool: "upload", SpanID: "big", Input: strings.Repeat("x", 9<<20)}) // over ingest's 8 MiB
	run.Flush()
	if took := time.Since(started); took > 1500*time.Millisecond {
		t.Fatalf("it waited %v to send it again", took)
	}
	// Counted as dropped and reported once, naming the span, its run, its size and the bound.
	if st := c.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v: the refused span is not counted as dropped", st)
	}
	var dropped *neatroots.EventsDroppedError
	if len(*errs) != 1 || !errors.As((*errs)[0], &dropped) || dropped.Count != 1 || !strings.Contains((*errs)[0].Error(), "ResourceExhausted") {
		t.Fatalf("errors: %v", *errs)
	}
	want := regexp.MustCompile(`^span big of run ` + run.ID + ` \((\d+) bytes\): over the 8388608 bytes ingest takes in one message \(`)
	if m := want.FindStringSubmatch(dropped.Reason); m == nil {
		t.Fatalf("reason %q", dropped.Reason)
	} else if n, _ := strconv.Atoi(m[1]); n <= 9<<20 || n > 9<<20+200 {
		t.Fatalf("reason %q: not the span's size", dropped.Reason)
	}
}

// A span over ingest's bound for one item (NEATROOTS_MAX_ITEM_CHARS, 4 Mi characters), though
// within its message bound, is refused alone and counted as dropped too, named with its size.
func TestASpanOverTheItemBoundIsCountedAsDropped(t *testing.T) {
	c, errs := client(t)
	run := c.StartRun(neatroots.RunOptions{Workflow: "support-agent"})
	run.Flush()
	run.Span(neatroots.SpanInit{Type: "tool", Tool: "upload", SpanID: "large", Input: strings.Repeat("x", 5<<20)})
	run.Flush()
	if st := c.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v: the refused span is not counted as dropped", st)
	}
	if len(*errs) != 1 {
		t.Fatalf("errors: %v", *errs)
	}
	msg := (*errs)[0].Error()
	for _, want := range []string{"InvalidArgument", "4194304", "(dropped: span large of run " + run.ID + " ("} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not say %q", msg, want)
		}
	}
}

// A span ingest rejects on its own (its end before its start) inside an export it accepts is
// not sent again: it is counted as dropped and reported as an *ExportRejectedError naming it;
// the rest of the export is kept.
func TestASpanRejectedInsideAnAcceptedExportIsCountedAsDropped(t *testing.T) {
	c, errs := client(t)
	run := c.StartRun(neatroots.RunOptions{Workflow: "support-agent"})
	now := float64(time.Now().UnixMilli())
	run.Span(neatroots.SpanInit{Type: "tool", Tool: "lookup", SpanID: "fine"})
	run.Span(neatroots.SpanInit{Type: "tool", Tool: "refund", SpanID: "backwards", StartMs: now, EndMs: now - 1000})
	run.Flush()
	if st := c.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v: the rejected span is not counted as dropped", st)
	}
	var rejected *neatroots.ExportRejectedError
	if len(*errs) != 1 || !errors.As((*errs)[0], &rejected) || len(rejected.Rejected) != 1 || rejected.DroppedInAll != 1 {
		t.Fatalf("errors: %v", *errs)
	}
	want := "neatroots rejected 1 item(s): span backwards of run " + run.ID + ": end_ms: is before start_ms ("
	if msg := (*errs)[0].Error(); !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, " (dropped, not sent again; 1 dropped in all)") {
		t.Fatalf("error %q", msg)
	}
}

// Against a running neatroots whose message bound (NEATROOTS_MAX_MESSAGE_BYTES) is 64 KiB, below
// the 4 MiB the client fills exports to (NEATROOTS_SMALL_ADDRESS): a batch over it is sent in
// halves down to the one span over it alone (dropped), and the bound is kept for the next batches.
func TestABatchOverALowerMessageBoundIsSentInHalves(t *testing.T) {
	addr, key := os.Getenv("NEATROOTS_SMALL_ADDRESS"), os.Getenv("NEATROOTS_API_KEY")
	if addr == "" || key == "" {
		t.Skip("NEATROOTS_SMALL_ADDRESS and NEATROOTS_API_KEY name a running neatroots taking at most 64 KiB in one message")
	}
	var mu sync.Mutex
	var errs []error
	c, err := neatroots.New(neatroots.Options{Address: addr, APIKey: key, NoSubscribe: true, FlushInterval: time.Minute, OnError: func(e error) {
		mu.Lock()
		errs = append(errs, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	reports := func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
	// One batch of about 340 KB: 30 spans of 8 KB and one of 100 KB.
	run := c.StartRun(neatroots.RunOptions{Workflow: "support-agent"})
	for i := 0; i < 30; i++ {
		run.Span(neatroots.SpanInit{Type: "tool", Tool: "lookup", Output: strings.Repeat("x", 8000)})
		if i == 20 {
			run.Span(neatroots.SpanInit{Type: "tool", Tool: "upload", SpanID: "huge", Output: strings.Repeat("x", 100_000)})
		}
	}
	run.Flush()
	// Without the split: Dropped 32 (the whole batch, run_start included), one report.
	if st := c.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v: want only the span over the bound dropped; reports: %v", st, reports())
	}
	got := reports()
	if len(got) != 2 {
		t.Fatalf("reports: %v", got)
	}
	split := regexp.MustCompile(`^export of 32 event\(s\) \(\d+ bytes\) is over what ingest takes in one message \(.*larger than max \(\d+ vs\.? 65536\)\): sent in halves; exports hold at most 65536 bytes from now on$`)
	if !split.MatchString(got[0].Error()) {
		t.Fatalf("first report %q", got[0])
	}
	var dropped *neatroots.EventsDroppedError
	if !errors.As(got[1], &dropped) || dropped.Count != 1 || !strings.HasPrefix(dropped.Reason, "span huge of run "+run.ID+" (") || !strings.Contains(dropped.Reason, "over the 65536 bytes ingest takes in one message") {
		t.Fatalf("second report %v", got[1])
	}
	// The bound is kept: the next run's batch goes in parts within it, none refused.
	next := c.StartRun(neatroots.RunOptions{Workflow: "support-agent"})
	for i := 0; i < 30; i++ {
		next.Span(neatroots.SpanInit{Type: "tool", Tool: "lookup", Output: strings.Repeat("x", 8000)})
	}
	next.Flush()
	if st, got := c.Stats(), reports(); st.Dropped != 1 || len(got) != 2 {
		t.Fatalf("stats %+v, reports %v: the next batch was refused again", st, got)
	}
}
