// Package neatroots is the agent client for Go, the same shape as the TypeScript SDK
// (@neatroots/sdk): start a run, record tool calls, receive notes, stop on a halt, end the run.
//
// It records a run's spans and run events, exports them in batches to ingest's neatroots.v1
// Ingest API (gRPC), and receives notes and halts for the run: a Subscribe stream per run,
// and notes piggybacked on export responses. Everything on the wire is the code generated
// from proto/ (package gen/neatroots/v1).
//
//	client, err := neatroots.New(neatroots.Options{Address: "localhost:50051", APIKey: key})
//	run := client.StartRun(neatroots.RunOptions{Workflow: "refund-agent"})
//	order, err := run.ToolCall("lookup_order", map[string]any{"id": 7}, func(ctx context.Context) (any, error) { return lookup(ctx, 7) })
//	run.End(neatroots.EndOptions{FinalOutput: answer})
//	client.Close()
package neatroots

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	mrand "math/rand"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "github.com/neatroots/neatroots/clients/go/gen/neatroots/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Note is a note or a halt (Kind "halt") neatroots sent about a run.
type Note = v1.Note

// Options configure a Client. Address and APIKey are required.
type Options struct {
	// host:port of ingest's neatroots.v1 API, e.g. localhost:50051.
	Address string
	APIKey  string
	// Default: plaintext. Use credentials.NewTLS(...) behind TLS.
	Credentials credentials.TransportCredentials
	// Events per export; reaching it wakes the flusher at once. Default 100. An export also
	// holds at most 4 MiB of encoded events (an event larger than that is sent alone), and
	// reaching that wakes the flusher at once too.
	MaxBatch int
	// Queued events are exported at least this often. Default 1 s.
	FlushInterval time.Duration
	// Deadline of one export call. Default 10 s.
	ExportTimeout time.Duration
	// Deprecated: ignored. A batch refused with a retryable status (UNAVAILABLE,
	// DEADLINE_EXCEEDED, ABORTED, RESOURCE_EXHAUSTED with RetryInfo) is retried until ingest accepts it
	// or the client is closed; only MaxQueueEvents and MaxQueueBytes drop events meanwhile.
	MaxAttempts int
	// Events waiting to be exported at most; past it the oldest waiting ones are dropped
	// (counted in Stats().Dropped). Default 10,000.
	MaxQueueEvents int
	// Encoded bytes of the events waiting to be exported at most; past it the oldest waiting
	// ones are dropped. An event larger than it on its own is dropped alone (counted and
	// reported with its size), never by evicting the others. Default 32 MiB.
	MaxQueueBytes int
	// First delay before an export is retried and before a notes stream is reopened; it
	// doubles up to RetryMaxDelay, with full jitter. Default 250 ms.
	RetryInitialDelay time.Duration
	// Cap of the retry and reconnect delays. Default 30 s.
	RetryMaxDelay time.Duration
	// How long Close flushes what is queued before it drops the rest. Default 10 s.
	CloseTimeout time.Duration
	// Open a Subscribe stream per run for notes and halts. Default true (set NoSubscribe to turn it off).
	NoSubscribe bool
	// Exports that failed for good, the first retried failure of an outage ("export of N
	// event(s) failed: ...; retrying until ingest takes it", once until an export succeeds),
	// items ingest rejected, events dropped, broken subscriptions, OnNote callbacks that
	// panicked. Default: log.Printf. It is called on a goroutine of the client's own, one report
	// at a time in the order they were made, never on the goroutine that exports, so it may
	// call Flush or Close; a slow one does not hold exports up. At most 256 reports wait for
	// it: past that they are dropped (counted in Stats().ReportsDropped and said in a report
	// once there is room). Flush and Close return once the reports made before them were
	// handed to OnError and it returned (FlushContext and CloseContext within their context,
	// Close at least 1 s; called from OnError itself, they do not wait for the reports, which
	// wait for that call). Nothing else waits for OnError: recording an event (one over the
	// queue bound, one recorded after Close, a value that is not JSON: each reported) and
	// Run.End return without it, so OnError may take a lock their caller holds. A report made
	// after Close reaches OnError only while the program runs on: Flush waits for it.
	OnError func(error)
}

// Stats are the client's export counters.
type Stats struct {
	// Events dropped without being exported: the oldest waiting ones past MaxQueueEvents or
	// MaxQueueBytes, one larger than MaxQueueBytes on its own, those of an export ingest refused
	// for good (one over its message or item bound included), those ingest rejected one by one
	// in an export it accepted (ExportResponse.Rejected), those not exported when Close's time
	// ran out (the batch being sent included: its export is cancelled unanswered, so ingest may
	// have taken it), and those recorded after Close (each reported to OnError).
	Dropped uint64
	// Events not exported yet: those waiting and the batch being sent (as the TypeScript and
	// Python clients count them).
	Queued int
	// Their encoded size.
	QueuedBytes int
	// Reports dropped without being handed to OnError: more than 256 were waiting for it.
	ReportsDropped uint64
}

// RunHaltedError is returned by ToolCall once the run was halted; Note is the halt.
type RunHaltedError struct{ Note *Note }

func (e *RunHaltedError) Error() string {
	if e.Note == nil {
		return "run halted by neatroots"
	}
	title := e.Note.Title
	if title == "" {
		title = e.Note.CheckId
	}
	if e.Note.Text != "" {
		return fmt.Sprintf("run halted by neatroots: %s: %s", title, e.Note.Text)
	}
	return "run halted by neatroots: " + title
}

// ExportRejectedError lists items ingest refused one by one (the rest of the batch was
// accepted). They are not sent again, so they are counted in Stats().Dropped; DroppedInAll is
// that count after them.
type ExportRejectedError struct {
	Rejected     []*v1.Rejected
	DroppedInAll uint64
}

func (e *ExportRejectedError) Error() string {
	reasons := make([]string, len(e.Rejected))
	for i, r := range e.Rejected {
		reasons[i] = r.Field + ": " + r.Reason
		if r.SpanId != "" {
			reasons[i] = fmt.Sprintf("span %s of run %s: %s", r.SpanId, r.RunId, reasons[i])
		}
	}
	return fmt.Sprintf("neatroots rejected %d item(s): %s (dropped, not sent again; %d dropped in all)", len(e.Rejected), strings.Join(reasons, "; "), e.DroppedInAll)
}

// EventsDroppedError reports events dropped without being exported (see Stats.Dropped).
type EventsDroppedError struct {
	Count  uint64
	Reason string
	// The gRPC status ingest refused them with, when it did (an export over its message bound).
	Err error
}

func (e *EventsDroppedError) Error() string {
	return fmt.Sprintf("neatroots dropped %d event(s): %s", e.Count, e.Reason)
}

func (e *EventsDroppedError) Unwrap() error { return e.Err }

// messageLimit finds the bound in grpc's refusal of a message too large ("Received message
// larger than max (9437210 vs 8388608)").
var messageLimit = regexp.MustCompile(`\(\d+ vs\.? (\d+)\)`)

// refused is the report of a batch ingest refused for good; its events were counted as dropped.
// One over ingest's message bound (RESOURCE_EXHAUSTED without RetryInfo) names its event (or
// run) and its size against the bound; any other refusal keeps its status first.
func refused(batch []queued, err error) error {
	if status.Code(err) == codes.ResourceExhausted {
		limit := "what ingest takes in one message"
		if m := messageLimit.FindStringSubmatch(status.Convert(err).Message()); m != nil {
			limit = "the " + m[1] + " bytes ingest takes in one message"
		}
		return &EventsDroppedError{Count: uint64(len(batch)), Err: err,
			Reason: fmt.Sprintf("%s: over %s (%v); not sent again", describe(batch), limit, err)}
	}
	return fmt.Errorf("export of %d event(s) failed: %w (dropped: %s)", len(batch), err, describe(batch))
}

// describe names a batch's event (span, run_start or run_end, and its run) and its encoded
// size, or for several events their runs and their size in all.
func describe(batch []queued) string {
	if len(batch) == 1 {
		q := batch[0]
		switch k := q.ev.Kind.(type) {
		case *v1.Event_Span:
			return fmt.Sprintf("span %s of run %s (%d bytes)", k.Span.SpanId, k.Span.RunId, q.size)
		case *v1.Event_RunStart:
			return fmt.Sprintf("run_start of run %s (%d bytes)", k.RunStart.RunId, q.size)
		case *v1.Event_RunEnd:
			return fmt.Sprintf("run_end of run %s (%d bytes)", k.RunEnd.RunId, q.size)
		}
		return fmt.Sprintf("an event of %d bytes", q.size)
	}
	runs, bytes, last := map[string]bool{}, 0, ""
	for _, q := range batch {
		bytes += q.size
		switch k := q.ev.Kind.(type) {
		case *v1.Event_Span:
			last = k.Span.RunId
		case *v1.Event_RunStart:
			last = k.RunStart.RunId
		case *v1.Event_RunEnd:
			last = k.RunEnd.RunId
		}
		runs[last] = true
	}
	if len(runs) == 1 {
		return fmt.Sprintf("%d events of run %s (%d bytes)", len(batch), last, bytes)
	}
	return fmt.Sprintf("%d events of %d runs (%d bytes)", len(batch), len(runs), bytes)
}

// Retried: nothing of the batch was acknowledged.
var retryableCodes = map[codes.Code]bool{codes.Unavailable: true, codes.DeadlineExceeded: true, codes.Aborted: true}

// retryable: ResourceExhausted is retried when it says when to try again (google.rpc.RetryInfo
// in its details: ingest's back-pressure), not otherwise: a message over the size bound would be
// refused again every time. after is the RetryInfo delay, if any.
func retryable(err error) (ok bool, after time.Duration) {
	st := status.Convert(err)
	hasInfo := false
	for _, d := range st.Details() {
		if ri, isInfo := d.(*errdetails.RetryInfo); isInfo {
			hasInfo = true
			if ri.RetryDelay != nil {
				after = max(after, ri.RetryDelay.AsDuration())
			}
		}
	}
	if retryableCodes[st.Code()] {
		return true, after
	}
	return st.Code() == codes.ResourceExhausted && hasInfo, after
}

// A notes stream that ends with one of these is not opened again: it would fail the same way.
var final = map[codes.Code]bool{codes.Unauthenticated: true, codes.PermissionDenied: true, codes.InvalidArgument: true}

// maxBatchBytes bounds the encoded events of one export (ingest refuses a message over 8 MiB by
// default), until ingest refused one as too large: then its bound (Client.batchBytes).
const maxBatchBytes = 4 << 20

// tooLarge: a message over the receiver's bound, RESOURCE_EXHAUSTED without RetryInfo saying
// "larger than max" (grpc's own refusal, "received message larger than max (X vs. Y)").
// Ingest's back-pressure is RESOURCE_EXHAUSTED too, but with RetryInfo: retried, never split.
func tooLarge(err error) bool {
	if again, _ := retryable(err); again || status.Code(err) != codes.ResourceExhausted {
		return false
	}
	return strings.Contains(strings.ToLower(status.Convert(err).Message()), "larger than max")
}

// dropReportEvery: events dropped for the queue bound are reported at most this often.
const dropReportEvery = 10 * time.Second

type queued struct {
	ev   *v1.Event
	size int
	seq  uint64
}

// Client is one gRPC connection to ingest, a bounded queue of events exported in batches by
// one background flusher, and its runs.
type Client struct {
	opts    Options
	conn    *grpc.ClientConn
	ingest  v1.IngestClient
	md      metadata.MD
	onError func(error) // the user's OnError: called only by the reports goroutine (deliverReports)
	reports reports

	mu         sync.Mutex
	queue      []queued
	queueBytes int
	inflight   []queued // the batch being sent (never dropped for the queue bound)
	batchBytes int      // encoded events an export holds at most: maxBatchBytes, or ingest's lower message bound
	seq        uint64   // of the last event queued
	changed    chan struct{}
	runs       map[string]*Run
	closed     bool
	dropped    uint64
	unreported uint64
	lastReport time.Time
	// An export is being retried and that was reported: reported again only after an export
	// succeeded. The flusher goroutine's alone (export runs on it), so not under mu.
	failing bool

	wake     chan struct{}   // a full batch or a Flush wakes the flusher
	stop     chan struct{}   // closed by Close: drain what is queued, then exit
	abortCtx context.Context // cancelled when Close's time ran out
	abort    context.CancelFunc
	done     chan struct{} // the flusher exited
}

// New connects lazily (the first export or stream dials).
func New(opts Options) (*Client, error) {
	if opts.Address == "" || opts.APIKey == "" {
		return nil, errors.New("neatroots: Options.Address and Options.APIKey are required")
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 100
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.ExportTimeout <= 0 {
		opts.ExportTimeout = 10 * time.Second
	}
	if opts.MaxQueueEvents <= 0 {
		opts.MaxQueueEvents = 10_000
	}
	if opts.MaxQueueBytes <= 0 {
		opts.MaxQueueBytes = 32 << 20
	}
	if opts.RetryInitialDelay <= 0 {
		opts.RetryInitialDelay = 250 * time.Millisecond
	}
	if opts.RetryMaxDelay <= 0 {
		opts.RetryMaxDelay = 30 * time.Second
	}
	opts.RetryMaxDelay = max(opts.RetryMaxDelay, opts.RetryInitialDelay)
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = 10 * time.Second
	}
	creds := opts.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	// Answers are taken whatever their size: an export's answer carries the notes of its runs
	// (up to 32 a run, each with its check's guidance) and may pass gRPC's default 4 MiB, whose
	// refusal ("received message larger than max") reads as ingest refusing the request.
	conn, err := grpc.NewClient(opts.Address, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
	if err != nil {
		return nil, fmt.Errorf("neatroots: %w", err)
	}
	abortCtx, abort := context.WithCancel(context.Background())
	c := &Client{
		opts: opts, conn: conn, ingest: v1.NewIngestClient(conn),
		md:   metadata.Pairs("x-api-key", opts.APIKey),
		runs: map[string]*Run{}, onError: opts.OnError, changed: make(chan struct{}),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), abortCtx: abortCtx, abort: abort, done: make(chan struct{}),
	}
	if c.onError == nil {
		c.onError = func(err error) { log.Printf("[neatroots] %v", err) }
	}
	go c.flusher()
	return c, nil
}

// Stats reads the client's export counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{Dropped: c.dropped, Queued: len(c.queue) + len(c.inflight), QueuedBytes: c.queueBytes}
	for _, q := range c.inflight {
		st.QueuedBytes += q.size
	}
	c.reports.mu.Lock()
	st.ReportsDropped = c.reports.droppedAll
	c.reports.mu.Unlock()
	return st
}

// RunOptions describe a run at its start (all optional).
type RunOptions struct {
	// Default: a random id.
	RunID        string
	Workflow     string
	SessionID    string
	SystemPrompt string
	UserMessage  string
	Tools        []ToolInfo
}

// ToolInfo is a tool the agent may call.
type ToolInfo struct{ Name, Description string }

// StartRun sends run_start and, unless NoSubscribe, opens the run's notes stream. After Close
// it returns a run that records nothing (its events are counted in Stats().Dropped and reported
// to OnError) and opens no stream.
func (c *Client) StartRun(o RunOptions) *Run {
	id := o.RunID
	if id == "" {
		id = randomHex(16)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &Run{client: c, ID: id, ctx: ctx, cancel: cancel, seen: map[string]bool{}, subscribed: make(chan struct{}), stopped: make(chan struct{})}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.runs[id] = r
	}
	c.mu.Unlock()
	tools := make([]*v1.ToolInfo, len(o.Tools))
	for i, t := range o.Tools {
		tools[i] = &v1.ToolInfo{Name: t.Name, Description: t.Description}
	}
	c.enqueue(&v1.Event{Kind: &v1.Event_RunStart{RunStart: &v1.RunStart{
		RunId: id, Workflow: o.Workflow, SessionId: o.SessionID, SystemPrompt: o.SystemPrompt,
		UserMessage: o.UserMessage, Tools: tools, TsMs: proto.Float64(nowMs()),
	}}})
	if closed {
		r.stopOnce.Do(func() { close(r.stopped) })
	} else if !c.opts.NoSubscribe {
		go r.listen()
	}
	return r
}

// Flush waits until everything queued so far was exported (or refused for good, or dropped),
// and until the reports made so far were handed to OnError and it returned. While ingest
// refuses with a retryable status that lasts until it accepts or the client closes, and an
// OnError that blocks is waited for as long as it blocks; FlushContext bounds the wait. Called
// from OnError, it does not wait for the reports (they wait for that very call to return).
func (c *Client) Flush() { _ = c.FlushContext(context.Background()) }

// FlushContext is Flush that stops waiting when ctx ends (the events stay queued, the reports
// still go to OnError); it returns ctx's error then.
func (c *Client) FlushContext(ctx context.Context) error { return c.flush(ctx, true) }

// flush waits for the export of everything queued so far and, if reports, for the reports made
// so far to reach OnError.
func (c *Client) flush(ctx context.Context, reports bool) error {
	c.mu.Lock()
	target := c.seq
	c.mu.Unlock()
	c.signal()
	for exported := false; !exported; {
		c.mu.Lock()
		done, changed := c.settled() >= target, c.changed
		c.mu.Unlock()
		if done {
			break
		}
		select {
		case <-changed:
		case <-c.done:
			exported = true // nothing is exported any more: what is left was dropped
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !reports {
		return nil
	}
	return c.awaitReports(ctx)
}

// settled is the sequence number up to which every event was exported, refused or dropped. c.mu held.
func (c *Client) settled() uint64 {
	if len(c.inflight) > 0 {
		return c.inflight[0].seq - 1
	}
	if len(c.queue) > 0 {
		return c.queue[0].seq - 1
	}
	return c.seq
}

// notify wakes the waiters of FlushContext. c.mu held.
func (c *Client) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Client) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close is CloseContext bounded by Options.CloseTimeout (default 10 s).
func (c *Client) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.CloseTimeout)
	defer cancel()
	return c.CloseContext(ctx)
}

// CloseContext flushes what is queued until ctx ends, then drops the rest (counted in
// Stats().Dropped and reported), ends every notes stream and closes the connection, then waits
// for the reports made so far to reach OnError and return (until ctx ends, at least 1 s; called
// from OnError, not at all). Runs not ended stay without run_end. It returns no later than 1 s
// after ctx ends.
func (c *Client) CloseContext(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	select {
	case <-c.done:
	case <-ctx.Done():
		// Not waited for any longer: the flusher stops at once (its export is cancelled; it
		// never waits for OnError). What it holds is counted as dropped below.
	}
	c.abort()
	c.mu.Lock()
	left := uint64(len(c.queue) + len(c.inflight))
	c.queue, c.queueBytes, c.inflight = nil, 0, nil
	c.dropped += left
	c.notify()
	runs := c.runs
	c.runs = map[string]*Run{}
	c.mu.Unlock()
	if left > 0 {
		c.report(&EventsDroppedError{Count: left, Reason: "still queued when Close's time ran out"})
	}
	for _, r := range runs {
		r.unsubscribe()
	}
	err := c.conn.Close()
	// What was reported until now reaches OnError before Close returns (a program often exits
	// next): until ctx ends, and at least 1 s (as Python's close()).
	wait, cancel := atLeast(ctx, time.Second)
	defer cancel()
	_ = c.awaitReports(wait)
	return err
}

// atLeast is a context that ends once ctx has ended and d has passed, both.
func atLeast(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	wait, cancel := context.WithCancel(context.Background())
	go func() {
		floor := time.NewTimer(d)
		defer floor.Stop()
		select {
		case <-ctx.Done():
		case <-wait.Done():
			return
		}
		select {
		case <-floor.C:
		case <-wait.Done():
			return
		}
		cancel()
	}()
	return wait, cancel
}

// flusher is the client's one exporting goroutine: it exports everything queued every
// FlushInterval, when a batch is full, on Flush, and on Close until the queue is empty or
// Close's time runs out.
func (c *Client) flusher() {
	defer close(c.done)
	t := time.NewTicker(c.opts.FlushInterval)
	defer t.Stop()
	stopping := false
	for {
		if !stopping {
			select {
			case <-c.stop:
				stopping = true
			case <-t.C:
			case <-c.wake:
			}
		}
		c.reportDrops(false)
		for c.abortCtx.Err() == nil {
			c.mu.Lock()
			batch := c.take()
			c.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			c.export(batch)
		}
		if stopping || c.abortCtx.Err() != nil {
			c.reportDrops(true)
			return
		}
	}
}

// take moves the next batch (at most MaxBatch events and maxBatchBytes, an oversized event
// alone) from the head of the queue to inflight. c.mu held.
func (c *Client) take() []queued {
	n, bytes := 0, 0
	limit := c.exportBytes()
	for n < len(c.queue) && n < c.opts.MaxBatch && (n == 0 || bytes+c.queue[n].size <= limit) {
		bytes += c.queue[n].size
		n++
	}
	c.inflight = append([]queued(nil), c.queue[:n]...)
	clear(c.queue[:n]) // the queue's array keeps no reference to them
	c.queue = c.queue[n:]
	c.queueBytes -= bytes
	return c.inflight
}

// exportBytes is the encoded events an export holds at most: maxBatchBytes, or ingest's lower
// message bound once it refused an export as too large. c.mu held.
func (c *Client) exportBytes() int {
	if c.batchBytes <= 0 {
		return maxBatchBytes
	}
	return c.batchBytes
}

func (c *Client) enqueue(ev *v1.Event) {
	n := proto.Size(ev)
	size := 1 + protowire.SizeVarint(uint64(n)) + n // its bytes in ExportRequest.events
	c.mu.Lock()
	if c.closed {
		c.dropped++
		c.mu.Unlock()
		// Reported, not waited for: recording an event never waits for OnError (which may
		// need a lock the caller holds). Flush waits for the report.
		c.report(&EventsDroppedError{Count: 1, Reason: "recorded after Close"})
		return
	}
	if size > c.opts.MaxQueueBytes {
		// Alone over the bound: refused on its own, never by evicting the events queued before it.
		c.dropped++
		c.mu.Unlock()
		c.report(&EventsDroppedError{Count: 1, Reason: fmt.Sprintf("event of %d bytes is larger than the queue bound of %d bytes (MaxQueueBytes)", size, c.opts.MaxQueueBytes)})
		return
	}
	c.seq++
	c.queue = append(c.queue, queued{ev: ev, size: size, seq: c.seq})
	c.queueBytes += size
	dropped := uint64(0)
	for len(c.queue) > 0 && (len(c.queue) > c.opts.MaxQueueEvents || c.queueBytes > c.opts.MaxQueueBytes) {
		c.queueBytes -= c.queue[0].size
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
		dropped++
	}
	if dropped > 0 {
		c.dropped += dropped
		c.unreported += dropped
		c.notify()
	}
	// A full batch wakes the flusher at once: MaxBatch events, or the bytes an export holds
	// (4 MiB, or ingest's lower bound), whichever comes first.
	full := len(c.queue) >= c.opts.MaxBatch || c.queueBytes >= c.exportBytes()
	c.mu.Unlock()
	if dropped > 0 {
		c.reportDrops(false)
	}
	if full {
		c.signal()
	}
}

// reportDrops reports the events dropped for the queue bound since the last report, at most
// once per dropReportEvery (now: regardless).
func (c *Client) reportDrops(now bool) {
	c.mu.Lock()
	n := c.unreported
	if n == 0 || (!now && time.Since(c.lastReport) < dropReportEvery) {
		c.mu.Unlock()
		return
	}
	c.unreported = 0
	c.lastReport = time.Now()
	c.mu.Unlock()
	c.report(&EventsDroppedError{Count: n, Reason: fmt.Sprintf("the queue was over its bound (%d events, %d bytes) while exports did not keep up", c.opts.MaxQueueEvents, c.opts.MaxQueueBytes)})
}

// backoff is attempt's delay: full jitter over RetryInitialDelay doubled per attempt, capped at RetryMaxDelay.
func (c *Client) backoff(attempt int) time.Duration {
	ceil := float64(c.opts.RetryInitialDelay) * math.Pow(2, float64(min(attempt, 40)))
	ceil = math.Min(ceil, float64(c.opts.RetryMaxDelay))
	return time.Duration(mrand.Float64() * ceil)
}

// export sends the inflight batch until ingest accepts it, refuses it for good, or Close's time
// runs out; then it clears inflight.
func (c *Client) export(batch []queued) {
	if c.send(batch, false) {
		c.mu.Lock()
		c.inflight = nil
		c.notify()
		c.mu.Unlock()
	}
}

// answered takes the events of part, answered (taken or refused), out of inflight: Close no
// longer counts them as dropped. It returns which of them were still there: an answer that came
// as Close's time ran out finds them counted as dropped already (Close took them), and must not
// count them again. c.mu held.
func (c *Client) answered(part []queued) map[uint64]bool {
	done := make(map[uint64]bool, len(part))
	for _, q := range part {
		done[q.seq] = true
	}
	there := make(map[uint64]bool, len(part))
	kept := make([]queued, 0, len(c.inflight)) // a new array: the batch being sent shares inflight's
	for _, q := range c.inflight {
		if done[q.seq] {
			there[q.seq] = true
		} else {
			kept = append(kept, q)
		}
	}
	c.inflight = kept
	return there
}

// stillThere is the events of part that answered found still in flight (there): those Close
// had not counted and reported as dropped yet.
func stillThere(part []queued, there map[uint64]bool) []queued {
	if len(there) == len(part) {
		return part
	}
	kept := make([]queued, 0, len(there))
	for _, q := range part {
		if there[q.seq] {
			kept = append(kept, q)
		}
	}
	return kept
}

// split sends a batch of several events ingest refused as over its message bound in halves
// (each halved again while refused so; a single event over the bound is dropped as before),
// and keeps the bound the refusal named (else, or when the batch was not over it, half the
// batch's size) for the following batches. Said once per batch of the queue, not for every
// half. False as send.
func (c *Client) split(batch []queued, err error, part bool) bool {
	bytes := 0
	for _, q := range batch {
		bytes += q.size
	}
	// A bound the refused batch was not over (a hop counting other bytes, a text naming another
	// bound) would let the next batches be refused and split again, every one: half the size then.
	bound := bytes / 2
	if m := messageLimit.FindStringSubmatch(status.Convert(err).Message()); m != nil {
		if n, perr := strconv.Atoi(m[1]); perr == nil && n < bytes {
			bound = n
		}
	}
	c.mu.Lock()
	if c.batchBytes <= 0 || c.batchBytes > maxBatchBytes {
		c.batchBytes = maxBatchBytes
	}
	c.batchBytes = max(1, min(c.batchBytes, bound))
	now := c.batchBytes
	c.mu.Unlock()
	if !part {
		c.report(fmt.Errorf("export of %d event(s) (%d bytes) is over what ingest takes in one message (%w): sent in halves; exports hold at most %d bytes from now on", len(batch), bytes, err, now))
	}
	half := (len(batch) + 1) / 2
	if !c.send(batch[:half], true) {
		return false
	}
	return c.send(batch[half:], true)
}

// send exports batch (the inflight batch, or a part of it) until ingest accepts it, refuses it
// for good, or Close's time runs out (false: Close counts what is left in inflight as dropped).
// A batch of several events over ingest's message bound is sent in halves (split).
func (c *Client) send(batch []queued, part bool) bool {
	events := make([]*v1.Event, len(batch))
	for i, q := range batch {
		events[i] = q.ev
	}
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(c.abortCtx, c.md), c.opts.ExportTimeout)
		res, err := c.ingest.Export(ctx, &v1.ExportRequest{Events: events})
		cancel()
		if err != nil {
			if c.abortCtx.Err() != nil {
				return false // counted as dropped by Close
			}
			again, after := retryable(err)
			if !again && len(batch) > 1 && tooLarge(err) {
				return c.split(batch, err, part)
			}
			if !again {
				// Refused for good (sending it again would be refused alike): lost, so counted
				// and reported, but only what is still in flight (not what Close, giving up since
				// the abort check above, counted and reported already).
				c.mu.Lock()
				there := c.answered(batch)
				c.dropped += uint64(len(there))
				c.mu.Unlock()
				if lost := stillThere(batch, there); len(lost) > 0 {
					c.report(refused(lost, err))
				}
				return true
			}
			// Said once per outage (a wrong address, ingest down), not at every retry.
			if !c.failing {
				c.failing = true
				c.report(fmt.Errorf("export of %d event(s) failed: %w; retrying until ingest takes it", len(events), err))
			}
			wait := max(c.backoff(attempt), after)
			select {
			case <-c.abortCtx.Done():
				return false
			case <-time.After(wait):
			}
			c.reportDrops(false)
			continue
		}
		// Refused one by one, each for good: lost, so counted as dropped and reported (once per
		// event of the batch, and not when Close counted and reported it already).
		c.mu.Lock()
		there := c.answered(batch)
		counted := map[int32]bool{}
		var rejected []*v1.Rejected
		for _, r := range res.Rejected {
			if r.Index >= 0 && int(r.Index) < len(events) {
				if !there[batch[r.Index].seq] {
					continue // Close counted and reported it
				}
				if !counted[r.Index] {
					counted[r.Index] = true
					c.dropped++
				}
			}
			rejected = append(rejected, r)
		}
		inAll := c.dropped
		c.mu.Unlock()
		c.failing = false
		if len(rejected) > 0 {
			c.report(&ExportRejectedError{Rejected: rejected, DroppedInAll: inAll})
		}
		for _, n := range res.Notes {
			c.dispatch(n)
		}
		return true
	}
}

func (c *Client) dispatch(n *Note) {
	c.mu.Lock()
	var runs []*Run
	if n.RunId != "" {
		if r, ok := c.runs[n.RunId]; ok {
			runs = append(runs, r)
		}
	} else {
		for _, r := range c.runs {
			runs = append(runs, r)
		}
	}
	c.mu.Unlock()
	for _, r := range runs {
		r.receive(n)
	}
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.runs, id)
	c.mu.Unlock()
}

// Run is one agent run: its spans, its notes and halts.
type Run struct {
	ID         string
	client     *Client
	ctx        context.Context
	cancel     context.CancelCauseFunc
	mu         sync.Mutex
	seen       map[string]bool
	listeners  []func(*Note)
	halt       *Note
	subscribed chan struct{}
	subOnce    sync.Once
	stopped    chan struct{}
	stopOnce   sync.Once
	endOnce    sync.Once
	stream     context.CancelFunc
	pending    []delivery // notes whose OnNote callbacks are still to be called, oldest first
	delivering bool       // a deliver goroutine is calling them
}

// Context is cancelled (cause: a *RunHaltedError) when the run is halted: pass it to model and tool calls.
func (r *Run) Context() context.Context { return r.ctx }

// Halted reports whether a halt reached the run.
func (r *Run) Halted() bool { return r.HaltNote() != nil }

// HaltNote is the halt that stopped the run, or nil.
func (r *Run) HaltNote() *Note {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.halt
}

// Subscribed is closed once the notes stream is open (halts can reach the run from then on).
func (r *Run) Subscribed() <-chan struct{} { return r.subscribed }

// OnNote calls fn for every note and halt of the run (each once, whichever way it came), in the
// order they came, on a goroutine of the run's own: never the one that exports nor the notes
// stream's, so fn may End the run, Flush or Close the client. A halt stops the run (Halted,
// Context) before any callback is called.
func (r *Run) OnNote(fn func(*Note)) {
	r.mu.Lock()
	r.listeners = append(r.listeners, fn)
	r.mu.Unlock()
}

// SpanInit is a finished span; Type is llm, tool, mcp_tool, retrieval, agent, ...
type SpanInit struct {
	Type, Name, Tool, Model, ParentID, Status string
	// Default: a random 16-hex-digit id.
	SpanID     string
	Input      any
	Output     any
	Error      *string
	StartMs    float64
	EndMs      float64
	Usage      *v1.Usage
	Attributes map[string]any
}

// Span records a finished span; it returns its span_id.
func (r *Run) Span(s SpanInit) string {
	id := s.SpanID
	if id == "" {
		id = randomHex(8)
	}
	if s.StartMs == 0 {
		s.StartMs = nowMs()
	}
	if s.EndMs == 0 {
		s.EndMs = s.StartMs
	}
	msg := &v1.Span{
		RunId: r.ID, SpanId: id, ParentId: s.ParentID, Type: s.Type, Name: s.Name, Tool: s.Tool,
		Status: s.Status, Model: s.Model, StartMs: proto.Float64(s.StartMs), EndMs: proto.Float64(s.EndMs),
		Error: s.Error, Usage: s.Usage,
		InputJson: jsonText(r.client, s.Input), OutputJson: jsonText(r.client, s.Output),
	}
	if s.Attributes != nil {
		msg.AttributesJson = jsonText(r.client, s.Attributes)
	}
	r.client.enqueue(&v1.Event{Kind: &v1.Event_Span{Span: msg}})
	return id
}

// ToolCall runs a tool and records it as a `tool` span (input, output or error, timing).
// Once the run is halted it returns a *RunHaltedError without calling fn. fn gets the run's
// context, cancelled on a halt.
func (r *Run) ToolCall(name string, input any, fn func(ctx context.Context) (any, error)) (any, error) {
	if n := r.HaltNote(); n != nil {
		return nil, &RunHaltedError{Note: n}
	}
	start := nowMs()
	out, err := fn(r.ctx)
	if err != nil {
		msg := err.Error()
		r.Span(SpanInit{Type: "tool", Name: name, Tool: name, Input: input, Error: &msg, Status: "error", StartMs: start, EndMs: nowMs()})
		return nil, err
	}
	r.Span(SpanInit{Type: "tool", Name: name, Tool: name, Input: input, Output: out, StartMs: start, EndMs: nowMs()})
	return out, nil
}

// Flush exports this run's spans queued so far (and everything else queued on the client).
func (r *Run) Flush() { r.client.Flush() }

// EndOptions close a run. Status defaults to "interrupted" when the run was halted, else "ok".
type EndOptions struct {
	Status      string
	FinalOutput any
}

// End sends run_end, waits up to Options.CloseTimeout for the run's events to be exported (what
// is not by then stays queued and is retried; it does not wait for OnError), and closes the
// run's notes stream. Idempotent.
func (r *Run) End(o EndOptions) {
	r.endOnce.Do(func() {
		st := o.Status
		if st == "" {
			st = "ok"
			if r.Halted() {
				st = "interrupted"
			}
		}
		r.client.enqueue(&v1.Event{Kind: &v1.Event_RunEnd{RunEnd: &v1.RunEnd{
			RunId: r.ID, Status: st, FinalOutputJson: jsonText(r.client, o.FinalOutput), TsMs: proto.Float64(nowMs()),
		}}})
		ctx, cancel := context.WithTimeout(context.Background(), r.client.opts.CloseTimeout)
		_ = r.client.flush(ctx, false) // the export only, not OnError
		cancel()
		r.unsubscribe()
		r.client.forget(r.ID)
	})
}

func (r *Run) receive(n *Note) {
	r.mu.Lock()
	if r.seen[n.Id] {
		r.mu.Unlock()
		return
	}
	r.seen[n.Id] = true
	if n.Kind == "halt" && r.halt == nil {
		r.halt = n
		r.cancel(&RunHaltedError{Note: n})
	}
	if len(r.listeners) == 0 {
		r.mu.Unlock()
		return
	}
	r.pending = append(r.pending, delivery{note: n, listeners: append([]func(*Note){}, r.listeners...)})
	start := !r.delivering
	r.delivering = true
	r.mu.Unlock()
	if start {
		go r.deliver()
	}
}

// delivery is a note and the OnNote callbacks registered when it came.
type delivery struct {
	note      *Note
	listeners []func(*Note)
}

// deliver calls the OnNote callbacks of the run's notes in the order the notes came, on a
// goroutine of its own that ends once none is left: never on the goroutine that exports (notes
// come back on export answers) nor on the notes stream's, so a callback may End the run, Flush
// or Close the client.
func (r *Run) deliver() {
	for {
		r.mu.Lock()
		if len(r.pending) == 0 {
			r.delivering = false
			r.mu.Unlock()
			return
		}
		d := r.pending[0]
		r.pending[0] = delivery{}
		r.pending = r.pending[1:]
		r.mu.Unlock()
		for _, fn := range d.listeners {
			r.call(fn, d.note)
		}
	}
}

// call runs an OnNote callback; a panic in it is reported through OnError, not the process's end.
func (r *Run) call(fn func(*Note), n *Note) {
	defer func() {
		if p := recover(); p != nil {
			r.client.report(fmt.Errorf("an OnNote callback of run %s panicked on note %s: %v", r.ID, n.Id, p))
		}
	}()
	fn(n)
}

// listen keeps the run's Subscribe stream open until the run ends or the client closes,
// reopening it after any end it did not cause (but the final codes), with backoff: from
// RetryInitialDelay doubling to RetryMaxDelay, full jitter, reset once a stream stayed open 10 s.
func (r *Run) listen() {
	c := r.client
	attempt := 0
	for {
		select {
		case <-r.stopped:
			return
		case <-c.stop:
			return
		default:
		}
		ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), c.md))
		r.mu.Lock()
		r.stream = cancel
		r.mu.Unlock()
		// unsubscribe closes stopped, then cancels r.stream: a run ended since the check above
		// either sees this cancel or is seen here; else its stream would stay open until Close.
		select {
		case <-r.stopped:
			cancel()
			return
		case <-c.stop:
			cancel()
			return
		default:
		}
		var opened time.Time
		markOpen := func() {
			if opened.IsZero() {
				opened = time.Now()
				r.subOnce.Do(func() { close(r.subscribed) })
			}
		}
		stream, err := c.ingest.Subscribe(ctx, &v1.SubscribeRequest{RunId: r.ID})
		if err == nil {
			// ingest sends headers once the subscription is in place; grpc-go's Header returns
			// (nil, nil) when the stream failed instead, so only headers with something in them count
			if md, herr := stream.Header(); herr == nil && len(md) > 0 {
				markOpen()
			}
			for {
				n, rerr := stream.Recv()
				if rerr != nil {
					err = rerr
					break
				}
				markOpen()
				r.receive(n)
			}
		}
		cancel()
		select {
		case <-r.stopped:
			return
		case <-c.stop:
			return
		default:
		}
		if final[status.Code(err)] {
			c.report(fmt.Errorf("notes for run %s unavailable: %w", r.ID, err))
			return
		}
		if !opened.IsZero() && time.Since(opened) >= 10*time.Second {
			attempt = 0
		}
		wait := c.backoff(attempt)
		attempt++
		select {
		case <-r.stopped:
			return
		case <-c.stop:
			return
		case <-time.After(wait):
		}
	}
}

func (r *Run) unsubscribe() {
	r.stopOnce.Do(func() { close(r.stopped) })
	r.mu.Lock()
	cancel := r.stream
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func nowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func jsonText(c *Client, v any) *string {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		c.report(fmt.Errorf("a value is not JSON (%v); sent as its text", err))
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	s := string(b)
	return &s
}

// maxPendingReports bounds the reports waiting for OnError; past it they are dropped and counted.
const maxPendingReports = 256

// reports are the reports waiting for OnError and the one goroutine handing them to it.
type reports struct {
	mu         sync.Mutex
	pending    []error
	made       uint64 // reports queued so far (each one's number is its place in this count)
	handed     uint64 // of them, handed to OnError and returned (or dropped)
	running    bool   // a deliverReports goroutine is running
	goroutine  uint64 // its id, once it runs (0: none)
	dropped    uint64 // dropped since the last report saying so
	droppedAll uint64
	changed    chan struct{} // closed and replaced whenever handed changes
}

// report hands err to OnError on the reports goroutine (started when a report comes, ended
// when none is left): never on the caller's goroutine, so the exporting one is never held up
// by OnError, and OnError may call Flush or Close. Past maxPendingReports waiting, err is
// dropped and counted.
func (c *Client) report(err error) {
	r := &c.reports
	r.mu.Lock()
	if len(r.pending) >= maxPendingReports {
		r.dropped++
		r.droppedAll++
		r.mu.Unlock()
		return
	}
	r.pending = append(r.pending, err)
	r.made++
	start := !r.running
	r.running = true
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	r.mu.Unlock()
	if start {
		go c.deliverReports()
	}
}

// deliverReports calls OnError with each waiting report in turn until none is left.
func (c *Client) deliverReports() {
	r := &c.reports
	id := goroutineID()
	r.mu.Lock()
	r.goroutine = id
	for len(r.pending) > 0 {
		err := r.pending[0]
		r.pending[0] = nil
		r.pending = r.pending[1:]
		r.mu.Unlock()
		c.onError(err)
		r.mu.Lock()
		r.handed++
		if r.dropped > 0 && len(r.pending) < maxPendingReports {
			r.pending = append(r.pending, fmt.Errorf("neatroots dropped %d report(s) for OnError: more than %d were waiting for it", r.dropped, maxPendingReports))
			r.made++
			r.dropped = 0
		}
		r.changedNow()
	}
	r.running = false
	r.goroutine = 0
	r.mu.Unlock()
}

// goroutineID is the id of the goroutine calling it, read from its stack's header line
// ("goroutine 18 [running]:"): how awaitReports tells OnError's own goroutine from the others.
func goroutineID() uint64 {
	var buf [64]byte
	line := buf[:runtime.Stack(buf[:], false)]
	line = bytes.TrimPrefix(line, []byte("goroutine "))
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		line = line[:i]
	}
	id, _ := strconv.ParseUint(string(line), 10, 64)
	return id
}

// changedNow wakes the waiters of awaitReports. r.mu held.
func (r *reports) changedNow() {
	if r.changed != nil {
		close(r.changed)
	}
	r.changed = make(chan struct{})
}

// awaitReports waits until the reports made so far were handed to OnError and it returned, or
// ctx ends (its error then). Called on the goroutine delivering them (an OnError that calls
// Flush or Close), it returns nil at once: the reports wait for that very call to return.
func (c *Client) awaitReports(ctx context.Context) error {
	r := &c.reports
	r.mu.Lock()
	target := r.made
	if r.handed < target && r.goroutine != 0 && r.goroutine == goroutineID() {
		r.mu.Unlock()
		return nil
	}
	for r.handed < target {
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
	}
	r.mu.Unlock()
	return nil
}
