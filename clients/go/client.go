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
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	mrand "math/rand"
	"strings"
	"sync"
	"time"

	v1 "github.com/neatroots/neatroots/clients/go/gen/neatroots/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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
	// Events per export; reaching it flushes at once. Default 100.
	MaxBatch int
	// Queued events are exported at least this often. Default 1 s.
	FlushInterval time.Duration
	// Deadline of one export call. Default 10 s.
	ExportTimeout time.Duration
	// Attempts per export, the first included. Default 6.
	MaxAttempts int
	// Open a Subscribe stream per run for notes and halts. Default true (set NoSubscribe to turn it off).
	NoSubscribe bool
	// Exports that failed for good, items ingest rejected, broken subscriptions. Default: log.Printf.
	OnError func(error)
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

// ExportRejectedError lists items ingest refused (the rest of the batch was accepted).
type ExportRejectedError struct{ Rejected []*v1.Rejected }

func (e *ExportRejectedError) Error() string {
	reasons := make([]string, len(e.Rejected))
	for i, r := range e.Rejected {
		reasons[i] = r.Field + ": " + r.Reason
	}
	return fmt.Sprintf("neatroots rejected %d item(s): %s", len(e.Rejected), strings.Join(reasons, "; "))
}

// Retried: nothing of the batch was acknowledged.
var retryableCodes = map[codes.Code]bool{codes.Unavailable: true, codes.DeadlineExceeded: true, codes.Aborted: true}

// retryable: ResourceExhausted is retried when it says when to try again (google.rpc.RetryInfo
// in its details: ingest's back-pressure), not otherwise: a message over the size bound would be
// refused again every time.
func retryable(err error) bool {
	st := status.Convert(err)
	if retryableCodes[st.Code()] {
		return true
	}
	return st.Code() == codes.ResourceExhausted && len(st.Proto().GetDetails()) > 0
}

// A notes stream that ends with one of these is not opened again: it would fail the same way.
var final = map[codes.Code]bool{codes.Unauthenticated: true, codes.PermissionDenied: true, codes.InvalidArgument: true}

// Client is one gRPC connection to ingest, a queue of events exported in batches, and its runs.
type Client struct {
	opts    Options
	conn    *grpc.ClientConn
	ingest  v1.IngestClient
	md      metadata.MD
	mu      sync.Mutex
	queue   []*v1.Event
	runs    map[string]*Run
	flushMu sync.Mutex
	stop    chan struct{}
	closed  bool
	onError func(error)
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
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 6
	}
	creds := opts.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(opts.Address, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("neatroots: %w", err)
	}
	c := &Client{
		opts: opts, conn: conn, ingest: v1.NewIngestClient(conn),
		md:   metadata.Pairs("x-api-key", opts.APIKey),
		runs: map[string]*Run{}, stop: make(chan struct{}), onError: opts.OnError,
	}
	if c.onError == nil {
		c.onError = func(err error) { log.Printf("[neatroots] %v", err) }
	}
	go c.tick()
	return c, nil
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

// StartRun sends run_start and, unless NoSubscribe, opens the run's notes stream.
func (c *Client) StartRun(o RunOptions) *Run {
	id := o.RunID
	if id == "" {
		id = randomHex(16)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &Run{client: c, ID: id, ctx: ctx, cancel: cancel, seen: map[string]bool{}, subscribed: make(chan struct{}), stopped: make(chan struct{})}
	c.mu.Lock()
	c.runs[id] = r
	c.mu.Unlock()
	tools := make([]*v1.ToolInfo, len(o.Tools))
	for i, t := range o.Tools {
		tools[i] = &v1.ToolInfo{Name: t.Name, Description: t.Description}
	}
	c.enqueue(&v1.Event{Kind: &v1.Event_RunStart{RunStart: &v1.RunStart{
		RunId: id, Workflow: o.Workflow, SessionId: o.SessionID, SystemPrompt: o.SystemPrompt,
		UserMessage: o.UserMessage, Tools: tools, TsMs: proto.Float64(nowMs()),
	}}})
	if !c.opts.NoSubscribe {
		go r.listen()
	}
	return r
}

// Flush exports everything queued so far; it returns when that is acknowledged (or given up on).
func (c *Client) Flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	for {
		c.mu.Lock()
		n := min(len(c.queue), c.opts.MaxBatch)
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		c.mu.Unlock()
		if n == 0 {
			return
		}
		c.export(batch)
	}
}

// Close flushes, ends every notes stream and closes the connection. Runs not ended stay without run_end.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	c.Flush()
	c.mu.Lock()
	runs := c.runs
	c.runs = map[string]*Run{}
	c.mu.Unlock()
	for _, r := range runs {
		r.unsubscribe()
	}
	return c.conn.Close()
}

func (c *Client) tick() {
	t := time.NewTicker(c.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.Flush()
		}
	}
}

func (c *Client) enqueue(ev *v1.Event) {
	c.mu.Lock()
	c.queue = append(c.queue, ev)
	full := len(c.queue) >= c.opts.MaxBatch
	c.mu.Unlock()
	if full {
		go c.Flush()
	}
}

func (c *Client) export(events []*v1.Event) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), c.md), c.opts.ExportTimeout)
		res, err := c.ingest.Export(ctx, &v1.ExportRequest{Events: events})
		cancel()
		if err != nil {
			if !retryable(err) || attempt >= c.opts.MaxAttempts {
				c.onError(fmt.Errorf("export of %d event(s) failed: %w", len(events), err))
				return
			}
			base := math.Min(5000, 200*math.Pow(2, float64(attempt-1)))
			time.Sleep(time.Duration(base/2+mrand.Float64()*base/2) * time.Millisecond)
			continue
		}
		if len(res.Rejected) > 0 {
			c.onError(&ExportRejectedError{Rejected: res.Rejected})
		}
		for _, n := range res.Notes {
			c.dispatch(n)
		}
		return
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

// OnNote calls fn for every note and halt of the run (each once, whichever way it came).
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

// End sends run_end, flushes, and closes the run's notes stream. Idempotent.
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
		r.client.Flush()
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
	listeners := append([]func(*Note){}, r.listeners...)
	r.mu.Unlock()
	for _, fn := range listeners {
		fn(n)
	}
}

// listen keeps the run's Subscribe stream open until the run ends, reopening it with backoff.
func (r *Run) listen() {
	delay := time.Duration(0)
	for {
		select {
		case <-r.stopped:
			return
		default:
		}
		ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), r.client.md))
		r.mu.Lock()
		r.stream = cancel
		r.mu.Unlock()
		stream, err := r.client.ingest.Subscribe(ctx, &v1.SubscribeRequest{RunId: r.ID})
		if err == nil {
			// ingest sends headers once the subscription is in place
			if _, err = stream.Header(); err == nil {
				r.subOnce.Do(func() { close(r.subscribed) })
				delay = 0
				for {
					n, rerr := stream.Recv()
					if rerr != nil {
						err = rerr
						break
					}
					r.receive(n)
				}
			}
		}
		cancel()
		select {
		case <-r.stopped:
			return
		default:
		}
		if final[status.Code(err)] {
			r.client.onError(fmt.Errorf("notes for run %s unavailable: %w", r.ID, err))
			return
		}
		if delay == 0 {
			delay = 250 * time.Millisecond
		} else {
			delay = min(10*time.Second, delay*2)
		}
		select {
		case <-r.stopped:
			return
		case <-time.After(delay):
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
		c.onError(fmt.Errorf("a value is not JSON (%v); sent as its text", err))
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	s := string(b)
	return &s
}
