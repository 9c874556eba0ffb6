package neatroots_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	neatroots "github.com/neatroots/neatroots/clients/go"
	v1 "github.com/neatroots/neatroots/clients/go/gen/neatroots/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ingest is a real local gRPC server standing in for ingest, whose answers a test chooses.
type ingest struct {
	v1.UnimplementedIngestServer
	mu         sync.Mutex
	export     func(call int, req *v1.ExportRequest) (*v1.ExportResponse, error)
	subscribe  func(call int, req *v1.SubscribeRequest, stream grpc.ServerStreamingServer[v1.Note]) error
	exports    int         // Export calls
	subscribes int         // Subscribe calls
	calls      []time.Time // when each Export came
	sizes      []int       // encoded size of each ExportRequest
	accepted   []*v1.Event
}

func (s *ingest) Export(_ context.Context, req *v1.ExportRequest) (*v1.ExportResponse, error) {
	s.mu.Lock()
	s.exports++
	call := s.exports
	s.calls = append(s.calls, time.Now())
	s.sizes = append(s.sizes, proto.Size(req))
	fn := s.export
	s.mu.Unlock()
	res, err := &v1.ExportResponse{}, error(nil)
	if fn != nil {
		res, err = fn(call, req)
	}
	if err == nil {
		s.mu.Lock()
		s.accepted = append(s.accepted, req.Events...)
		s.mu.Unlock()
		if res == nil {
			res = &v1.ExportResponse{}
		}
	}
	return res, err
}

func (s *ingest) Subscribe(req *v1.SubscribeRequest, stream grpc.ServerStreamingServer[v1.Note]) error {
	s.mu.Lock()
	s.subscribes++
	call := s.subscribes
	fn := s.subscribe
	s.mu.Unlock()
	if fn == nil {
		_ = stream.SendHeader(metadata.MD{})
		<-stream.Context().Done()
		return nil
	}
	return fn(call, req, stream)
}

func (s *ingest) snapshot() (exports, subscribes int, accepted []*v1.Event, sizes []int, calls []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exports, s.subscribes, append([]*v1.Event{}, s.accepted...), append([]int{}, s.sizes...), append([]time.Time{}, s.calls...)
}

func serve(t *testing.T, s *ingest) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	v1.RegisterIngestServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

type errs struct {
	mu   sync.Mutex
	list []error
}

func (e *errs) add(err error) { e.mu.Lock(); e.list = append(e.list, err); e.mu.Unlock() }
func (e *errs) all() []error  { e.mu.Lock(); defer e.mu.Unlock(); return append([]error{}, e.list...) }

func fakeClient(t *testing.T, addr string, o neatroots.Options) (*neatroots.Client, *errs) {
	t.Helper()
	e := &errs{}
	o.Address, o.APIKey, o.OnError = addr, "k", e.add
	c, err := neatroots.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, e
}

func spanIDs(evs []*v1.Event) []string {
	ids := []string{}
	for _, ev := range evs {
		switch {
		case ev.GetSpan() != nil:
			ids = append(ids, ev.GetSpan().SpanId)
		case ev.GetRunStart() != nil:
			ids = append(ids, "run_start")
		case ev.GetRunEnd() != nil:
			ids = append(ids, "run_end")
		}
	}
	return ids
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A batch ingest refuses with UNAVAILABLE is sent again until ingest takes it, however many
// times that takes (it was dropped after 6 attempts), with the retry delays the options set.
func TestARefusedBatchIsRetriedUntilIngestTakesIt(t *testing.T) {
	s := &ingest{export: func(call int, _ *v1.ExportRequest) (*v1.ExportResponse, error) {
		if call <= 12 {
			return nil, status.Error(codes.Unavailable, "ingest restarting")
		}
		return nil, nil
	}}
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour,
		RetryInitialDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "s1"})
	started := time.Now()
	run.End(neatroots.EndOptions{})
	if took := time.Since(started); took > 3*time.Second {
		t.Fatalf("the retries took %v with delays of at most 5 ms", took)
	}
	exports, _, accepted, _, _ := s.snapshot()
	if got := strings.Join(spanIDs(accepted), ","); got != "run_start,s1,run_end" || exports != 13 {
		t.Fatalf("accepted %s after %d calls", got, exports)
	}
	if st := c.Stats(); st.Dropped != 0 || st.Queued != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The outage is reported once, not at each of the 12 refusals.
	want := "export of 3 event(s) failed: rpc error: code = Unavailable desc = ingest restarting; retrying until ingest takes it"
	if got := e.all(); len(got) != 1 || got[0].Error() != want {
		t.Fatalf("errors: %v", got)
	}
}

// retrying lists the reports that an export is being retried.
func retrying(e *errs) []string {
	out := []string{}
	for _, err := range e.all() {
		if strings.HasSuffix(err.Error(), "; retrying until ingest takes it") {
			out = append(out, err.Error())
		}
	}
	return out
}

// While exports are retried (ingest down, a wrong address), the first failure of the outage is
// reported once through OnError, not at every retry; after an export succeeded, the next outage
// is reported once more.
func TestAnOutageIsReportedOnceWhileRetriedAgainAfterASuccess(t *testing.T) {
	var down atomic.Bool
	s := &ingest{export: func(int, *v1.ExportRequest) (*v1.ExportResponse, error) {
		if down.Load() {
			return nil, status.Error(codes.Unavailable, "ingest down")
		}
		return nil, nil
	}}
	// MaxBatch 2: two events make a full batch, which wakes the flusher (FlushInterval never does).
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour, MaxBatch: 2,
		RetryInitialDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond})
	exports := func() int { n, _, _, _, _ := s.snapshot(); return n }

	down.Store(true)
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "first"})
	eventually(t, "a report that the export is retried", func() bool { return len(retrying(e)) > 0 })
	tries := exports()
	eventually(t, "five more retries", func() bool { return exports() >= tries+5 })
	want := "export of 2 event(s) failed: rpc error: code = Unavailable desc = ingest down; retrying until ingest takes it"
	if got := retrying(e); len(got) != 1 || got[0] != want {
		t.Fatalf("reports over %d tries: %q", exports(), got)
	}
	if got := e.all(); len(got) != 1 || status.Code(errors.Unwrap(got[0])) != codes.Unavailable {
		t.Fatalf("errors: %v (the report wraps the gRPC status)", got)
	}

	down.Store(false)
	c.Flush()
	if _, _, accepted, _, _ := s.snapshot(); strings.Join(spanIDs(accepted), ",") != "run_start,first" {
		t.Fatalf("accepted %v", spanIDs(accepted))
	}

	down.Store(true) // a second outage is reported once more
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "second"})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "third"})
	eventually(t, "a report of the second outage", func() bool { return len(retrying(e)) > 1 })
	again := exports()
	eventually(t, "five more retries", func() bool { return exports() >= again+5 })
	if got := retrying(e); len(got) != 2 || got[1] != want {
		t.Fatalf("reports: %q", got)
	}
	down.Store(false)
	c.Flush()
	if _, _, accepted, _, _ := s.snapshot(); strings.Join(spanIDs(accepted), ",") != "run_start,first,second,third" {
		t.Fatalf("accepted %v", spanIDs(accepted))
	}
	if got := e.all(); len(got) != 2 {
		t.Fatalf("errors: %v", got)
	}
	if st := c.Stats(); st.Dropped != 0 || st.Queued != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// RESOURCE_EXHAUSTED with RetryInfo is retried no sooner than the delay it asks for; without
// RetryInfo the batch is dropped and reported at once.
func TestBackPressureIsRetriedAfterItsDelayAndAnotherRefusalIsNot(t *testing.T) {
	backPressure, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(300 * time.Millisecond)})
	s := &ingest{export: func(call int, req *v1.ExportRequest) (*v1.ExportResponse, error) {
		if call == 1 {
			return nil, backPressure.Err()
		}
		if len(req.Events) == 1 && req.Events[0].GetSpan() != nil && req.Events[0].GetSpan().SpanId == "big" {
			return nil, status.Error(codes.ResourceExhausted, "message too large")
		}
		return nil, nil
	}}
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour,
		RetryInitialDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	run.Flush()
	_, _, _, _, calls := s.snapshot()
	if len(calls) != 2 || calls[1].Sub(calls[0]) < 300*time.Millisecond {
		t.Fatalf("calls %v: the retry did not wait for RetryInfo's 300 ms", calls)
	}
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "big"})
	run.Flush()
	exports, _, accepted, _, _ := s.snapshot()
	if exports != 3 || strings.Join(spanIDs(accepted), ",") != "run_start" {
		t.Fatalf("%d calls, accepted %v", exports, spanIDs(accepted))
	}
	// The back-pressure once as being retried, then the refusal for good.
	got := e.all()
	if len(got) != 2 || got[0].Error() != "export of 1 event(s) failed: rpc error: code = ResourceExhausted desc = slow down; retrying until ingest takes it" ||
		!regexp.MustCompile(`^neatroots dropped 1 event\(s\): span big of run `+run.ID+` \(\d+ bytes\): over what ingest takes in one message \(rpc error: code = ResourceExhausted desc = message too large\); not sent again$`).MatchString(got[1].Error()) ||
		status.Code(errors.Unwrap(got[1])) != codes.ResourceExhausted {
		t.Fatalf("errors: %v", got)
	}
	if st := c.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v: the span refused for good is not counted as dropped", st)
	}
}

// While ingest refuses, the queue keeps at most MaxQueueEvents: the oldest waiting events are
// dropped (never the batch being sent), counted, and reported at most once per 10 s.
func TestTheQueueIsBoundedAndDropsTheOldest(t *testing.T) {
	var refuse sync.Mutex
	refusing := true
	s := &ingest{export: func(int, *v1.ExportRequest) (*v1.ExportResponse, error) {
		refuse.Lock()
		defer refuse.Unlock()
		if refusing {
			return nil, status.Error(codes.Unavailable, "down")
		}
		return nil, nil
	}}
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour, MaxBatch: 1,
		MaxQueueEvents: 5, RetryInitialDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	eventually(t, "run_start being sent", func() bool { n, _, _, _, _ := s.snapshot(); return n > 0 })
	for i := 0; i < 20; i++ {
		run.Span(neatroots.SpanInit{Type: "tool", SpanID: fmt.Sprintf("s%d", i)})
	}
	// 5 waiting, and run_start being sent (Queued counts the batch being sent).
	if st := c.Stats(); st.Dropped != 15 || st.Queued != 6 {
		t.Fatalf("stats %+v", st)
	}
	refuse.Lock()
	refusing = false
	refuse.Unlock()
	run.Flush()
	_, _, accepted, _, _ := s.snapshot()
	if got := strings.Join(spanIDs(accepted), ","); got != "run_start,s15,s16,s17,s18,s19" {
		t.Fatalf("accepted %s", got)
	}
	var dropped *neatroots.EventsDroppedError
	reports := 0
	for _, err := range e.all() {
		if errors.As(err, &dropped) {
			reports++
		}
	}
	if reports != 1 || dropped.Count != 1 {
		t.Fatalf("drop reports within 10 s: %v", e.all())
	}
}

// An export holds at most 4 MiB of events; an event over that goes alone, so it cannot take
// the events around it down with it.
func TestBatchesAreBoundedBySize(t *testing.T) {
	s := &ingest{}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	for i := 0; i < 3; i++ {
		run.Span(neatroots.SpanInit{Type: "tool", SpanID: fmt.Sprintf("s%d", i), Input: strings.Repeat("x", 1500<<10)})
	}
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "huge", Input: strings.Repeat("x", 5<<20)})
	run.End(neatroots.EndOptions{})
	_, _, accepted, sizes, _ := s.snapshot()
	if got := strings.Join(spanIDs(accepted), ","); got != "run_start,s0,s1,s2,huge,run_end" {
		t.Fatalf("accepted %s", got)
	}
	over := 0
	for _, n := range sizes {
		if n > 4<<20 {
			over++
			if n > 5<<20+1024 {
				t.Fatalf("an export of %d bytes: sizes %v", n, sizes)
			}
		}
	}
	if over != 1 || len(sizes) != 4 {
		t.Fatalf("export sizes %v: want [run_start+s0+s1, s2, huge alone, run_end]", sizes)
	}
}

// Events filling an export's 4 MiB are exported at once, as MaxBatch events are, not at the
// next FlushInterval: fewer than MaxBatch large events used to wait for it (here an hour).
func TestAnExportFullInBytesIsSentAtOnce(t *testing.T) {
	s := &ingest{}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	for i := 0; i < 3; i++ {
		run.Span(neatroots.SpanInit{Type: "tool", SpanID: fmt.Sprintf("s%d", i), Input: strings.Repeat("x", 1500<<10)})
	}
	// 4 events of 100 (MaxBatch) but 4.4 MiB: the first export (run_start, s0, s1) goes now
	// (and s2 after it, the flusher emptying the queue).
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, accepted, _, _ := s.snapshot()
		if got := strings.Join(spanIDs(accepted), ","); strings.HasPrefix(got, "run_start,s0,s1") {
			break
		}
		if time.Now().After(deadline) {
			_, _, accepted, _, _ = s.snapshot()
			t.Fatalf("10 s after 4.4 MiB of events were queued, exported %v (want run_start,s0,s1 without waiting for FlushInterval or Flush)", spanIDs(accepted))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Stats().Queued and QueuedBytes count the batch being sent, as the TypeScript and Python
// clients' stats do: an event whose export has not been answered is not exported yet.
func TestQueuedCountsTheBatchBeingSent(t *testing.T) {
	release := make(chan struct{})
	s := &ingest{export: func(int, *v1.ExportRequest) (*v1.ExportResponse, error) {
		<-release
		return nil, nil
	}}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour, MaxBatch: 2})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "s0"})
	eventually(t, "the first export", func() bool { n, _, _, _, _ := s.snapshot(); return n > 0 })
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "s1"})
	st := c.Stats()
	if st.Queued != 3 || st.QueuedBytes <= 0 {
		close(release)
		t.Fatalf("stats %+v while run_start and s0 are being sent and s1 waits: want Queued 3", st)
	}
	close(release)
	run.Flush()
	if st := c.Stats(); st.Queued != 0 || st.QueuedBytes != 0 {
		t.Fatalf("stats %+v after Flush: want nothing queued", st)
	}
}

// While exports are slow, recording events does not start a goroutine each.
func TestOneFlusherWhileExportsAreSlow(t *testing.T) {
	release := make(chan struct{})
	s := &ingest{export: func(int, *v1.ExportRequest) (*v1.ExportResponse, error) {
		<-release
		return nil, nil
	}}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour, MaxBatch: 1})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	eventually(t, "the first export", func() bool { n, _, _, _, _ := s.snapshot(); return n > 0 })
	before := runtime.NumGoroutine()
	for i := 0; i < 500; i++ {
		run.Span(neatroots.SpanInit{Type: "tool", SpanID: fmt.Sprintf("s%d", i)})
	}
	time.Sleep(50 * time.Millisecond)
	if grew := runtime.NumGoroutine() - before; grew > 10 {
		t.Fatalf("%d goroutines more after 500 events", grew)
	}
	close(release)
	run.Flush()
	if _, _, accepted, _, _ := s.snapshot(); len(accepted) != 501 {
		t.Fatalf("accepted %d events", len(accepted))
	}
}

// Close flushes for at most CloseTimeout (CloseContext: until its context ends), then drops
// what is left, counts it and reports it.
func TestCloseGivesUpAtItsTimeout(t *testing.T) {
	s := &ingest{export: func(int, *v1.ExportRequest) (*v1.ExportResponse, error) {
		return nil, status.Error(codes.Unavailable, "down")
	}}
	for _, withContext := range []bool{false, true} {
		c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, CloseTimeout: 300 * time.Millisecond})
		run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
		for i := 0; i < 3; i++ {
			run.Span(neatroots.SpanInit{Type: "tool"})
		}
		started := time.Now()
		if withContext {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_ = c.CloseContext(ctx)
			cancel()
		} else {
			_ = c.Close()
		}
		if took := time.Since(started); took > time.Second {
			t.Fatalf("Close took %v", took)
		}
		if st := c.Stats(); st.Dropped != 4 || st.Queued != 0 {
			t.Fatalf("stats %+v", st)
		}
		// The drop, after the outage's one report when the first refusal came before the limit.
		var dropped *neatroots.EventsDroppedError
		got := e.all()
		if reported := len(retrying(e)); reported > 1 || len(got) != reported+1 || !errors.As(got[len(got)-1], &dropped) || dropped.Count != 4 {
			t.Fatalf("errors: %v", got)
		}
	}
}

// A Subscribe that ingest refuses is not taken for an open stream (grpc-go's Header answers
// (nil, nil) then), and the reconnect delay grows instead of starting over every time.
func TestARefusedSubscriptionIsNotOpenAndBacksOff(t *testing.T) {
	s := &ingest{subscribe: func(int, *v1.SubscribeRequest, grpc.ServerStreamingServer[v1.Note]) error {
		return status.Error(codes.Unavailable, "no notes now")
	}}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{FlushInterval: time.Hour, RetryInitialDelay: 40 * time.Millisecond, RetryMaxDelay: 10 * time.Second})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	select {
	case <-run.Subscribed():
		t.Fatal("a refused stream counted as open")
	case <-time.After(1500 * time.Millisecond):
	}
	// 40 ms doubling with full jitter: about 6 attempts in 1.5 s; starting over every time
	// (0..40 ms each) would be about 75
	if _, n, _, _, _ := s.snapshot(); n < 2 || n > 20 {
		t.Fatalf("%d Subscribe calls in 1.5 s", n)
	}
}

// A stream that ingest ends, even with CANCELLED, is opened again, and a note on it arrives.
func TestAStreamEndedByIngestIsReopened(t *testing.T) {
	s := &ingest{subscribe: func(call int, req *v1.SubscribeRequest, stream grpc.ServerStreamingServer[v1.Note]) error {
		_ = stream.SendHeader(metadata.MD{})
		if call == 1 {
			return status.Error(codes.Canceled, "ingest shutting down")
		}
		_ = stream.Send(&v1.Note{Id: "n1", RunId: req.RunId, Kind: "note", Text: "hello"})
		<-stream.Context().Done()
		return nil
	}}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{FlushInterval: time.Hour, RetryInitialDelay: 10 * time.Millisecond})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	notes := make(chan *neatroots.Note, 1)
	run.OnNote(func(n *neatroots.Note) { notes <- n })
	select {
	case n := <-notes:
		if n.Text != "hello" {
			t.Fatalf("note %+v", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream was not reopened")
	}
}

// A panicking OnNote callback is reported through OnError; the process and the other
// callbacks go on.
func TestAPanickingOnNoteIsReported(t *testing.T) {
	s := &ingest{subscribe: func(_ int, req *v1.SubscribeRequest, stream grpc.ServerStreamingServer[v1.Note]) error {
		_ = stream.SendHeader(metadata.MD{})
		_ = stream.Send(&v1.Note{Id: "n1", RunId: req.RunId, Kind: "halt", Text: "stop"})
		<-stream.Context().Done()
		return nil
	}}
	c, e := fakeClient(t, serve(t, s), neatroots.Options{FlushInterval: time.Hour})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	run.OnNote(func(*neatroots.Note) { panic("callback bug") })
	got := make(chan *neatroots.Note, 1)
	run.OnNote(func(n *neatroots.Note) { got <- n })
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the second callback was not called")
	}
	if !run.Halted() {
		t.Fatal("the halt did not stop the run")
	}
	eventually(t, "the panic reported", func() bool {
		for _, err := range e.all() {
			if strings.Contains(err.Error(), "callback bug") {
				return true
			}
		}
		return false
	})
}

// A run started after Close records nothing and leaves no goroutine reconnecting.
func TestStartRunAfterCloseLeavesNothingRunning(t *testing.T) {
	s := &ingest{}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{FlushInterval: time.Hour, RetryInitialDelay: 5 * time.Millisecond})
	_ = c.Close()
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
		run.Span(neatroots.SpanInit{Type: "tool"}) // and never ended, as a run cut short
	}
	time.Sleep(200 * time.Millisecond)
	if grew := runtime.NumGoroutine() - before; grew > 2 {
		t.Fatalf("%d goroutines left running by runs started after Close", grew)
	}
	if exports, subscribes, _, _, _ := s.snapshot(); exports != 0 || subscribes != 0 {
		t.Fatalf("%d exports, %d subscribes after Close", exports, subscribes)
	}
	if st := c.Stats(); st.Dropped != 40 {
		t.Fatalf("stats %+v", st)
	}
}

// The reconnect delay starts over once a stream stayed open 10 s: after 8 refusals the delay has
// grown to 20 ms * 2^9 (10 s, with jitter); a stream then open for 10 s that ingest ends is
// reopened, through 2 more refusals, within 20 + 40 + 80 ms (without the reset: within a
// sum of three delays of up to 10, 20 and 40 s).
func TestTheReconnectDelayStartsOverAfterTenSecondsOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 12 s")
	}
	var mu sync.Mutex
	var ended time.Time
	reopened := make(chan time.Duration, 1)
	s := &ingest{subscribe: func(call int, _ *v1.SubscribeRequest, stream grpc.ServerStreamingServer[v1.Note]) error {
		switch {
		case call <= 8:
			return status.Error(codes.Unavailable, "not yet")
		case call == 9:
			_ = stream.SendHeader(metadata.MD{})
			time.Sleep(10100 * time.Millisecond)
			mu.Lock()
			ended = time.Now()
			mu.Unlock()
			return status.Error(codes.Unavailable, "ingest restarting")
		case call <= 11:
			return status.Error(codes.Unavailable, "still restarting")
		case call == 12:
			mu.Lock()
			reopened <- time.Since(ended)
			mu.Unlock()
		}
		_ = stream.SendHeader(metadata.MD{})
		<-stream.Context().Done()
		return nil
	}}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{FlushInterval: time.Hour, RetryInitialDelay: 20 * time.Millisecond, RetryMaxDelay: time.Minute})
	c.StartRun(neatroots.RunOptions{Workflow: "w"})
	select {
	case gap := <-reopened:
		if gap > time.Second {
			t.Fatalf("reopened (3 attempts) %v after a stream open 10 s ended", gap)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("not reopened within 40 s")
	}
}

// A note that comes back on an export's answer is handed to OnNote off the goroutine that
// exports, so a callback may End its run and Flush the client: both wait for exports, and they
// waited for the very goroutine that was calling them (End until CloseTimeout, Flush and then
// Close for ever).
func TestOnNoteMayEndTheRunAndFlushTheClient(t *testing.T) {
	s := &ingest{export: func(_ int, req *v1.ExportRequest) (*v1.ExportResponse, error) {
		for _, ev := range req.Events {
			if sp := ev.GetSpan(); sp != nil {
				return &v1.ExportResponse{Notes: []*v1.Note{{Id: "h-" + sp.SpanId, RunId: sp.RunId, Kind: "halt", Title: "stop"}}}, nil
			}
		}
		return nil, nil
	}}
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: 10 * time.Millisecond, CloseTimeout: 3 * time.Second})
	returned := make(chan string, 4)
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	run.OnNote(func(*neatroots.Note) {
		run.End(neatroots.EndOptions{}) // the natural answer to a halt
		_, _, accepted, _, _ := s.snapshot()
		returned <- "End: " + strings.Join(spanIDs(accepted), ",")
		c.Flush()
		returned <- "Flush"
	})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "s1"})
	for _, want := range []string{"End: run_start,s1,run_end", "Flush"} {
		select {
		case got := <-returned:
			if got != want {
				t.Fatalf("inside OnNote: %q, want %q (End gave up waiting for the export)", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q inside OnNote has not returned after 5 s", want)
		}
	}
	if !run.Halted() {
		t.Fatal("the halt did not stop the run")
	}
	closed := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = c.CloseContext(ctx)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(8 * time.Second):
		t.Fatal("CloseContext(2 s) has not returned after 8 s")
	}
	if got := e.all(); len(got) != 0 {
		t.Fatalf("errors: %v", got)
	}
}

// CloseContext returns once its context ends, even while the exporting goroutine is held up in
// a callback (here an OnError that blocks): it waited for that goroutine without limit.
func TestCloseContextReturnsOnceItsContextEndsWhateverTheFlusherIsDoing(t *testing.T) {
	s := &ingest{export: func(int, *v1.ExportRequest) (*v1.ExportResponse, error) {
		return nil, status.Error(codes.InvalidArgument, "bad export")
	}}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	inside := make(chan struct{}, 1)
	c, err := neatroots.New(neatroots.Options{Address: serve(t, s), APIKey: "k", NoSubscribe: true, FlushInterval: 10 * time.Millisecond,
		OnError: func(err error) {
			if status.Code(errors.Unwrap(err)) != codes.InvalidArgument {
				return // Close's own report of what it dropped
			}
			select {
			case inside <- struct{}{}:
			default:
			}
			<-release
		}})
	if err != nil {
		t.Fatal(err)
	}
	c.StartRun(neatroots.RunOptions{Workflow: "w"})
	select {
	case <-inside:
	case <-time.After(5 * time.Second):
		t.Fatal("the refused export was not reported")
	}
	closed := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = c.CloseContext(ctx)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("CloseContext(200 ms) has not returned after 5 s")
	}
}

// One event larger than MaxQueueBytes on its own is dropped alone and reported with its size;
// the events queued before it (the run's run_start) and after it are kept. It used to evict
// every other queued event, then itself, blaming slow exports.
func TestAnEventOverTheQueueByteBoundIsDroppedAloneAndNamed(t *testing.T) {
	s := &ingest{}
	const bound = 10_000
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour, MaxQueueBytes: bound})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "before"})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "big", Attributes: map[string]any{"blob": strings.Repeat("x", bound)}})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "after"})
	run.Flush()
	_, _, accepted, _, _ := s.snapshot()
	if got := strings.Join(spanIDs(accepted), ","); got != "run_start,before,after" {
		t.Fatalf("accepted %s", got)
	}
	if st := c.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
	var dropped *neatroots.EventsDroppedError
	got := e.all()
	if len(got) != 1 || !errors.As(got[0], &dropped) || dropped.Count != 1 {
		t.Fatalf("errors: %v", got)
	}
	m := regexp.MustCompile(`^event of (\d+) bytes is larger than the queue bound of 10000 bytes \(MaxQueueBytes\)$`).FindStringSubmatch(dropped.Reason)
	if m == nil {
		t.Fatalf("reason %q", dropped.Reason)
	}
	if n, _ := strconv.Atoi(m[1]); n <= bound || n > bound+200 {
		t.Fatalf("reason %q: not the big span's size", dropped.Reason)
	}
}

// A run ended while its notes stream is being opened leaves no stream open: the stream used to
// be stored and opened after the run's end was checked, so End could not cancel it and it
// stayed open until Close.
func TestEndedRunsLeaveNoNotesStreamOpen(t *testing.T) {
	var open atomic.Int64
	s := &ingest{subscribe: func(_ int, _ *v1.SubscribeRequest, stream grpc.ServerStreamingServer[v1.Note]) error {
		open.Add(1)
		defer open.Add(-1)
		_ = stream.SendHeader(metadata.MD{"x": []string{"1"}})
		<-stream.Context().Done()
		return nil
	}}
	c, _ := fakeClient(t, serve(t, s), neatroots.Options{FlushInterval: time.Hour, CloseTimeout: 5 * time.Second})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				c.StartRun(neatroots.RunOptions{Workflow: "w"}).End(neatroots.EndOptions{})
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for open.Load() != 0 {
		if time.Now().After(deadline) {
			_, subscribes, _, _, _ := s.snapshot()
			t.Fatalf("%d notes streams of ended runs still open 10 s after every run ended (%d opened)", open.Load(), subscribes)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An event recorded after Close is counted as dropped and reported to OnError.
func TestAnEventRecordedAfterCloseIsReported(t *testing.T) {
	s := &ingest{}
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	before := len(e.all())
	run.Span(neatroots.SpanInit{Type: "tool", Tool: "late"})
	c.Flush() // recording does not wait for OnError; Flush does
	got := e.all()[before:]
	var dropped *neatroots.EventsDroppedError
	if len(got) != 1 || !errors.As(got[0], &dropped) || dropped.Count != 1 || !strings.Contains(dropped.Reason, "after Close") {
		t.Fatalf("errors for a span recorded after Close: %v", got)
	}
	if st := c.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// OnError is called off the goroutine that exports, so a callback may Flush and Close the
// client: it was called on the exporting goroutine, so a Flush in it waited for itself for
// ever (and held every export up while it waited).
func TestOnErrorMayFlushAndCloseTheClient(t *testing.T) {
	s := &ingest{export: func(call int, _ *v1.ExportRequest) (*v1.ExportResponse, error) {
		if call == 1 {
			return nil, status.Error(codes.InvalidArgument, "bad export")
		}
		return nil, nil
	}}
	returned := make(chan string, 8)
	var c *neatroots.Client
	var once sync.Once
	c, err := neatroots.New(neatroots.Options{Address: serve(t, s), APIKey: "k", NoSubscribe: true, FlushInterval: 10 * time.Millisecond, CloseTimeout: 3 * time.Second,
		OnError: func(err error) {
			if status.Code(errors.Unwrap(err)) != codes.InvalidArgument {
				return
			}
			once.Do(func() {
				// Something to export after the refused batch: this Flush waits for it.
				c.StartRun(neatroots.RunOptions{RunID: "second", Workflow: "w"})
				c.Flush()
				returned <- "Flush"
				_ = c.Close()
				returned <- "Close"
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.StartRun(neatroots.RunOptions{RunID: "first", Workflow: "w"})
	for _, want := range []string{"Flush", "Close"} {
		select {
		case got := <-returned:
			if got != want {
				t.Fatalf("inside OnError: %q returned, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s inside OnError has not returned after 10 s", want)
		}
	}
	if _, _, accepted, _, _ := s.snapshot(); len(accepted) != 1 || accepted[0].GetRunStart().GetRunId() != "second" {
		t.Fatalf("accepted %v, want the second run's run_start (exported while OnError ran)", accepted)
	}
}

// A refusal as too large naming a bound the batch was not over (a hop in front of ingest
// counting other bytes, or naming another bound than its own) still lowers the export size,
// to half the refused batch: the next batches are not refused, split and reported again, each.
func TestARefusalNamingABoundTheBatchWasNotOverStillLowersTheExportSize(t *testing.T) {
	s := &ingest{export: func(_ int, req *v1.ExportRequest) (*v1.ExportResponse, error) {
		if n := proto.Size(req); n > 2000 {
			return nil, status.Errorf(codes.ResourceExhausted, "received message larger than max (%d vs. %d)", n, 4<<20)
		}
		return nil, nil
	}}
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour})
	for b := 0; b < 4; b++ {
		run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
		for i := 0; i < 20; i++ {
			run.Span(neatroots.SpanInit{Type: "tool", Output: strings.Repeat("x", 300)})
		}
		c.Flush()
	}
	exports, _, accepted, _, _ := s.snapshot()
	if st := c.Stats(); st.Dropped != 0 || len(accepted) != 84 {
		t.Fatalf("stats %+v, %d accepted", st, len(accepted))
	}
	// Before: every batch refused and split again (4 reports, "at most 4194304 bytes from now on").
	got := e.all()
	if len(got) != 1 || !regexp.MustCompile(`^export of 21 event\(s\) \((\d+) bytes\) is over .*: sent in halves; exports hold at most \d+ bytes from now on$`).MatchString(got[0].Error()) {
		t.Fatalf("%d export(s), reports: %v", exports, got)
	}
	m := regexp.MustCompile(`\((\d+) bytes\) is over .* at most (\d+) bytes`).FindStringSubmatch(got[0].Error())
	if b, _ := strconv.Atoi(m[1]); m[2] != strconv.Itoa(b/2) {
		t.Fatalf("report %q: want half the batch's size kept", got[0])
	}
}

// An export's answer larger than gRPC's default 4 MiB receive bound (notes piggybacked on it:
// up to 32 a run, each with its check's guidance) is taken whole. The client's own bound
// refused it with RESOURCE_EXHAUSTED "received message larger than max (X vs. 4194304)", the
// text of ingest refusing a request as too large: the events ingest had taken were sent again
// in halves and the notes lost (or, alone, counted as dropped).
func TestAnAnswerOverFourMiBIsTaken(t *testing.T) {
	s := &ingest{export: func(_ int, req *v1.ExportRequest) (*v1.ExportResponse, error) {
		res := &v1.ExportResponse{Accepted: int32(len(req.Events))}
		for _, ev := range req.Events {
			if sp := ev.GetSpan(); sp != nil {
				for i := 0; i < 32; i++ {
					res.Notes = append(res.Notes, &v1.Note{Id: fmt.Sprintf("n-%s-%d", sp.SpanId, i), RunId: sp.RunId, Kind: "note", Title: "t", Text: strings.Repeat("g", 100_000)})
				}
			}
		}
		return res, nil
	}}
	c, e := fakeClient(t, serve(t, s), neatroots.Options{NoSubscribe: true, FlushInterval: time.Hour})
	run := c.StartRun(neatroots.RunOptions{Workflow: "w"})
	var notes atomic.Int32
	run.OnNote(func(*neatroots.Note) { notes.Add(1) })
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "a"})
	run.Span(neatroots.SpanInit{Type: "tool", SpanID: "b"})
	c.Flush()
	eventually(t, "64 notes", func() bool { return notes.Load() == 64 || len(e.all()) > 0 })
	exports, _, accepted, _, _ := s.snapshot()
	if st := c.Stats(); exports != 1 || len(accepted) != 3 || st.Dropped != 0 || len(e.all()) != 0 || notes.Load() != 64 {
		t.Fatalf("an answer of 6.4 MB: %d export(s) of %v, stats %+v, %d notes of 64, reports %v; want one export taken, its notes, nothing dropped or reported", exports, spanIDs(accepted), st, notes.Load(), e.all())
	}
}
