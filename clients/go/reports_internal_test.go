package neatroots

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/neatroots/neatroots/clients/go/gen/neatroots/v1"
	"google.golang.org/grpc"
)

// accepting stands in for ingest: it takes every export.
type accepting struct {
	v1.UnimplementedIngestServer
	mu     sync.Mutex
	events []*v1.Event
}

func (s *accepting) Export(_ context.Context, req *v1.ExportRequest) (*v1.ExportResponse, error) {
	s.mu.Lock()
	s.events = append(s.events, req.Events...)
	s.mu.Unlock()
	return &v1.ExportResponse{}, nil
}

func (s *accepting) kinds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	kinds := []string{}
	for _, ev := range s.events {
		switch {
		case ev.GetRunStart() != nil:
			kinds = append(kinds, "run_start")
		case ev.GetRunEnd() != nil:
			kinds = append(kinds, "run_end")
		case ev.GetSpan() != nil:
			kinds = append(kinds, "span")
		}
	}
	return kinds
}

func acceptingServer(t *testing.T) (*accepting, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &accepting{}
	g := grpc.NewServer()
	v1.RegisterIngestServer(g, s)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return s, lis.Addr().String()
}

// delivered is what OnError got, in order, and each report as OnError began it.
type delivered struct {
	mu      sync.Mutex
	got     []string
	started chan string
}

func (d *delivered) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string{}, d.got...)
}

func (d *delivered) add(s string) {
	d.mu.Lock()
	d.got = append(d.got, s)
	d.mu.Unlock()
}

func (d *delivered) begun(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-d.started:
		if got != want {
			t.Fatalf("OnError began %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("OnError did not begin %q within 10 s", want)
	}
}

// Flush and Close wait until the reports made before them reached OnError and it returned. They
// did not wait at all while OnError was running: the wait ended as soon as it saw the report
// being handled then still being handled.
func TestFlushAndCloseWaitForTheReportsMadeBeforeThem(t *testing.T) {
	_, addr := acceptingServer(t)
	release := make(chan struct{})
	d := &delivered{started: make(chan string, 16)}
	c, err := New(Options{Address: addr, APIKey: "k", NoSubscribe: true, OnError: func(err error) {
		d.started <- err.Error()
		if err.Error() == "blocks" {
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		} else {
			time.Sleep(300 * time.Millisecond)
		}
		d.add(err.Error())
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(func() { close(release) }) // before Close (last in, first out)
	c.report(errors.New("first"))
	d.begun(t, "first") // OnError is running
	c.report(errors.New("second"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.FlushContext(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.list(), ","); got != "first,second" {
		t.Fatalf("Flush returned with OnError given [%s], want [first,second]", got)
	}
	d.begun(t, "second")
	// Within its context: its error when OnError did not return in time.
	c.report(errors.New("blocks"))
	d.begun(t, "blocks")
	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelShort()
	began := time.Now()
	if err := c.FlushContext(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("FlushContext returned %v with the blocked report still in OnError, want context.DeadlineExceeded", err)
	}
	if took := time.Since(began); took < 450*time.Millisecond {
		t.Fatalf("FlushContext(500 ms) returned after %v", took)
	}
	release <- struct{}{}
	c.report(errors.New("third"))
	d.begun(t, "third")
	c.report(errors.New("fourth"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.list(), ","); got != "first,second,blocks,third,fourth" {
		t.Fatalf("Close returned with OnError given [%s], want [first,second,blocks,third,fourth]", got)
	}
}

// Close waits for the reports made before it, its own report of what it dropped included, for
// what is left of its time and at least 1 s: with ingest down and an OnError taking 300 ms,
// Close returned while OnError handled the outage's report, and a program exiting next lost
// "dropped 2 event(s)".
func TestCloseWaitsForASlowOnErrorAtLeastOneSecond(t *testing.T) {
	d := &delivered{started: make(chan string, 16)}
	c, err := New(Options{Address: "127.0.0.1:1", APIKey: "k", NoSubscribe: true, FlushInterval: 10 * time.Millisecond,
		RetryInitialDelay: 10 * time.Millisecond, OnError: func(err error) {
			select {
			case d.started <- err.Error():
			default:
			}
			time.Sleep(300 * time.Millisecond)
			d.add(err.Error())
		}})
	if err != nil {
		t.Fatal(err)
	}
	run := c.StartRun(RunOptions{Workflow: "w"})
	run.Span(SpanInit{Type: "tool", Tool: "t"})
	select {
	case got := <-d.started: // the outage's report, being handled
		if !strings.Contains(got, "retrying until ingest takes it") {
			t.Fatalf("first report %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the outage was not reported")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = c.CloseContext(ctx)
	got := d.list()
	if len(got) != 2 || got[1] != "neatroots dropped 2 event(s): still queued when Close's time ran out" {
		t.Fatalf("Close returned with OnError given %q, want the outage's report and Close's own", got)
	}

	// Time left in ctx, less than OnError takes: Close waits 1 s at least, as Python's close().
	d2 := &delivered{started: make(chan string, 16)}
	c2, err := New(Options{Address: "127.0.0.1:1", APIKey: "k", NoSubscribe: true, OnError: func(err error) {
		time.Sleep(600 * time.Millisecond)
		d2.add(err.Error())
	}})
	if err != nil {
		t.Fatal(err)
	}
	c2.report(errors.New("slow"))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	_ = c2.CloseContext(ctx2)
	if got := d2.list(); len(got) != 1 {
		t.Fatalf("CloseContext(200 ms) returned with OnError given %q, want [slow] (it waits 1 s at least)", got)
	}
}

// Recording an event never waits for OnError, whatever happens to the event: one over the
// queue bound, one recorded after Close, a value that is not JSON, and End after Close waited
// until OnError returned (without limit), so an OnError taking a lock the caller held deadlocked.
func TestRecordingAnEventNeverWaitsForOnError(t *testing.T) {
	_, addr := acceptingServer(t)
	var held sync.Mutex
	d := &delivered{}
	c, err := New(Options{Address: addr, APIKey: "k", NoSubscribe: true, MaxQueueBytes: 1000, OnError: func(err error) {
		held.Lock()
		d.add(err.Error())
		held.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	returnsHoldingTheLock := func(what string, call func()) {
		t.Helper()
		returned := make(chan struct{})
		go func() {
			held.Lock()
			defer held.Unlock()
			call()
			close(returned)
		}()
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s waited for an OnError waiting for the caller's lock", what)
		}
	}
	run := c.StartRun(RunOptions{Workflow: "w"})
	returnsHoldingTheLock("an event over the queue bound", func() {
		run.Span(SpanInit{Type: "tool", SpanID: "big", Input: strings.Repeat("x", 2000)})
	})
	returnsHoldingTheLock("a value that is not JSON", func() {
		run.Span(SpanInit{Type: "tool", SpanID: "odd", Input: func() {}})
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	returnsHoldingTheLock("an event after Close", func() { run.Span(SpanInit{Type: "tool", SpanID: "late"}) })
	returnsHoldingTheLock("End after Close", func() { run.End(EndOptions{}) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.FlushContext(ctx); err != nil { // Flush waits for them
		t.Fatal(err)
	}
	got := d.list()
	if len(got) != 4 || !strings.Contains(got[0], "is larger than the queue bound of 1000 bytes") ||
		!strings.HasPrefix(got[1], "a value is not JSON") ||
		got[2] != "neatroots dropped 1 event(s): recorded after Close" || got[3] != got[2] {
		t.Fatalf("reports %q", got)
	}
}

// End waits for its export, not for OnError: it flushed the client, which waits for OnError
// too, so a blocked OnError held every End up for CloseTimeout.
func TestRunEndWaitsForItsExportNotForOnError(t *testing.T) {
	s, addr := acceptingServer(t)
	release := make(chan struct{})
	inside := make(chan struct{}, 1)
	c, err := New(Options{Address: addr, APIKey: "k", NoSubscribe: true, FlushInterval: time.Hour, CloseTimeout: 5 * time.Second,
		OnError: func(error) {
			select {
			case inside <- struct{}{}:
			default:
			}
			<-release
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(func() { close(release) }) // before Close (last in, first out)
	run := c.StartRun(RunOptions{Workflow: "w"})
	c.report(errors.New("blocks"))
	select {
	case <-inside:
	case <-time.After(10 * time.Second):
		t.Fatal("the report did not reach OnError")
	}
	c.report(errors.New("waits behind it"))
	began := time.Now()
	run.End(EndOptions{})
	if took := time.Since(began); took > 2500*time.Millisecond {
		t.Fatalf("End took %v: it waited for OnError", took)
	}
	if got := strings.Join(s.kinds(), ","); got != "run_start,run_end" {
		t.Fatalf("exported [%s], want [run_start,run_end]", got)
	}
}
