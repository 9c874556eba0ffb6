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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rejecting stands in for ingest: it takes every export but rejects its second event on its own.
type rejecting struct{ v1.UnimplementedIngestServer }

func (s *rejecting) Export(context.Context, *v1.ExportRequest) (*v1.ExportResponse, error) {
	return &v1.ExportResponse{Accepted: 1, Rejected: []*v1.Rejected{{Index: 1, Field: "end_ms", Reason: "is before start_ms"}}}, nil
}

// closingFirst lets Close's time run out (and Close count what is in flight) between the answer
// of an export and the flusher reading it: the order a Close racing an answer may take.
type closingFirst struct {
	v1.IngestClient
	c *Client
}

func (w closingFirst) Export(ctx context.Context, req *v1.ExportRequest, opts ...grpc.CallOption) (*v1.ExportResponse, error) {
	res, err := w.IngestClient.Export(ctx, req, opts...)
	closeNow(w.c)
	return res, err
}

// closeNow runs Close with its time already up: it counts what is in flight as dropped.
func closeNow(c *Client) {
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.CloseContext(expired)
}

// droppedAfterCloseRace sends run_start and one span to srv through wrap's ingest client
// (which lets Close give up at some point of the export) and answers Stats and the reports
// OnError got once the flusher ended.
func droppedAfterCloseRace(t *testing.T, srv v1.IngestServer, wrap func(v1.IngestClient, *Client) v1.IngestClient) (Stats, []error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	v1.RegisterIngestServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	var mu sync.Mutex
	var reports []error
	c, err := New(Options{Address: lis.Addr().String(), APIKey: "k", NoSubscribe: true, FlushInterval: time.Hour, OnError: func(err error) {
		mu.Lock()
		reports = append(reports, err)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	c.ingest = wrap(c.ingest, c)
	run := c.StartRun(RunOptions{Workflow: "w"})
	run.Span(SpanInit{Type: "tool"})
	c.signal()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the flusher did not end")
	}
	if err := c.awaitReports(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return c.Stats(), append([]error{}, reports...)
}

// reportsEachDropOnce fails unless the reports are Close's one, counting run_start and the
// span: Close took them in flight, so the flusher reading their answer reports them no more.
func reportsEachDropOnce(t *testing.T, reports []error) {
	t.Helper()
	var dropped *EventsDroppedError
	if len(reports) != 1 || !errors.As(reports[0], &dropped) || dropped.Count != 2 || !strings.Contains(dropped.Reason, "Close's time ran out") {
		t.Fatalf("reports %q: want Close's one report of the 2 events it dropped, each dropped event reported once", reports)
	}
}

// An answer that comes as Close gives up finds its events counted as dropped by Close: the
// event ingest rejected in it is not counted again (Dropped was 3 of 2 events).
func TestAnAnswerAsCloseGivesUpCountsNoEventTwice(t *testing.T) {
	st, reports := droppedAfterCloseRace(t, &rejecting{}, func(in v1.IngestClient, c *Client) v1.IngestClient { return closingFirst{IngestClient: in, c: c} })
	// run_start and the span, each counted once: by Close, which took them in flight.
	if st.Dropped != 2 {
		t.Fatalf("stats %+v: 2 events, each counted once", st)
	}
	// and reported once: the rejection came for an event Close reported already.
	reportsEachDropOnce(t, reports)
}

// refusing stands in for ingest: it refuses every export for good (INVALID_ARGUMENT).
type refusing struct{ v1.UnimplementedIngestServer }

func (s *refusing) Export(context.Context, *v1.ExportRequest) (*v1.ExportResponse, error) {
	return nil, status.Error(codes.InvalidArgument, "refused for good")
}

// closingOnRead is the refusal of an export that lets Close's time run out (and Close count
// what is in flight) when the flusher first reads its status: after the flusher's check of
// Close's abort and before it counts the refused batch, the order a Close racing a refusal
// may take.
type closingOnRead struct {
	st   *status.Status
	c    *Client
	once *sync.Once
}

func (e closingOnRead) Error() string { return e.st.Message() }

func (e closingOnRead) GRPCStatus() *status.Status {
	e.once.Do(func() { closeNow(e.c) })
	return e.st
}

type closingOnRefusal struct {
	v1.IngestClient
	c *Client
}

func (w closingOnRefusal) Export(ctx context.Context, req *v1.ExportRequest, opts ...grpc.CallOption) (*v1.ExportResponse, error) {
	res, err := w.IngestClient.Export(ctx, req, opts...)
	if err != nil {
		return res, closingOnRead{st: status.Convert(err), c: w.c, once: &sync.Once{}}
	}
	return res, err
}

// An export refused for good as Close gives up finds its events counted as dropped by Close:
// they are not counted again (Dropped was 4 of 2 events).
func TestARefusalAsCloseGivesUpCountsNoEventTwice(t *testing.T) {
	st, reports := droppedAfterCloseRace(t, &refusing{}, func(in v1.IngestClient, c *Client) v1.IngestClient { return closingOnRefusal{IngestClient: in, c: c} })
	// run_start and the span, each counted once: by Close, which took them in flight.
	if st.Dropped != 2 {
		t.Fatalf("stats %+v: 2 events, each counted once", st)
	}
	// and reported once: the refusal came for events Close reported already (it was reported
	// again as 'export of 2 event(s) failed: ... (dropped: ...)').
	reportsEachDropOnce(t, reports)
}
