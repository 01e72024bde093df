// Package faultproxy is a reverse proxy in front of a real S3-compatible server that injects,
// per request, the faults that server cannot produce on demand: an S3 error answer (503 SlowDown,
// say), a response held back, a response body cut or stalled part way. Every other request, and
// every request a fault lets through, is answered by the real server. Test-only: nothing of the
// product imports it.
//
// Requests reach the server with their own Host header, so that their signatures still verify.
package faultproxy

import (
	"context"
	"crypto/rand"
	"encoding/xml"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what a Rule does to a request it matches.
type Fault struct {
	// Status, if set, answers the request with this status and an S3 error body of Code and
	// Message, as S3 does, instead of forwarding it.
	Status        int
	Code, Message string
	// Delay holds the request this long before forwarding (or answering) it: a server that does
	// not answer. It ends early if the client gives up.
	Delay time.Duration
	// CutBody forwards the request, then drops the connection after After bytes of the
	// response's body: a server that dies mid-response.
	CutBody bool
	// StallBody forwards the request, then holds the response's body after After bytes until the
	// client gives up: a server that stops sending mid-response.
	StallBody bool
	After     int64
}

// SlowDown is S3's throttling answer: 503 SlowDown.
var SlowDown = Fault{Status: http.StatusServiceUnavailable, Code: "SlowDown", Message: "Please reduce your request rate."}

// Rule injects its Fault into the requests it matches.
type Rule struct {
	match    func(*http.Request) bool
	times    int64 // how many matching requests get the fault; 0 for every one
	fault    Fault
	injected atomic.Int64
}

// Injected is how many requests got the rule's fault.
func (r *Rule) Injected() int { return int(r.injected.Load()) }

func (r *Rule) take(req *http.Request) bool {
	if !r.match(req) {
		return false
	}
	for {
		n := r.injected.Load()
		if r.times > 0 && n >= r.times {
			return false
		}
		if r.injected.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Request is a request the proxy saw.
type Request struct {
	Method, Path string
	Query        url.Values
	At           time.Time
	Fault        bool // a rule's fault was injected
}

// Proxy is a fault proxy on a loopback port of its own.
type Proxy struct {
	URL string // http://127.0.0.1:<port>, the endpoint to give the client

	rp  *httputil.ReverseProxy
	srv *http.Server

	mu    sync.Mutex
	rules []*Rule
	seen  []Request
}

// New starts a proxy in front of target (http://host:port); it stops when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + l.Addr().String()}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
			pr.Out.Host = pr.In.Host // the client signed the Host it sent
		},
		ModifyResponse: func(resp *http.Response) error {
			if f, ok := resp.Request.Context().Value(faultKey{}).(*Fault); ok && (f.CutBody || f.StallBody) {
				resp.Body = &faultyBody{r: resp.Body, f: f, ctx: resp.Request.Context()}
			}
			return nil
		},
		// Each write of a body reaches the client at once: a cut or a stall comes after the
		// bytes before it were sent, mid-body, not before the response's headers.
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0), // a client that gave up is no news
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: time.Minute}
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

// Inject adds a rule: the first times requests that match get f (every one for times 0). Rules
// are tried in the order they were added; a request gets the first fault whose rule takes it.
func (p *Proxy) Inject(match func(*http.Request) bool, times int, f Fault) *Rule {
	r := &Rule{match: match, times: int64(times), fault: f}
	p.mu.Lock()
	p.rules = append(p.rules, r)
	p.mu.Unlock()
	return r
}

// Clear drops every rule: from now on every request goes to the server untouched.
func (p *Proxy) Clear() {
	p.mu.Lock()
	p.rules = nil
	p.mu.Unlock()
}

// Seen is every request the proxy saw that match takes (every one for nil), in order.
func (p *Proxy) Seen(match func(*http.Request) bool) []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Request
	for _, r := range p.seen {
		req := &http.Request{Method: r.Method, URL: &url.URL{Path: r.Path, RawQuery: r.Query.Encode()}}
		if match == nil || match(req) {
			out = append(out, r)
		}
	}
	return out
}

type faultKey struct{}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p.mu.Lock()
	var fault *Fault
	for _, r := range p.rules {
		if r.take(req) {
			fault = &r.fault
			break
		}
	}
	p.seen = append(p.seen, Request{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query(), At: time.Now(), Fault: fault != nil})
	p.mu.Unlock()
	if fault == nil {
		p.rp.ServeHTTP(w, req)
		return
	}
	if fault.Delay > 0 {
		select {
		case <-time.After(fault.Delay):
		case <-req.Context().Done():
			return // the client gave up
		}
	}
	if fault.Status != 0 {
		_, _ = io.Copy(io.Discard, req.Body)
		writeError(w, req, fault)
		return
	}
	p.rp.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), faultKey{}, fault)))
}

// writeError answers as S3 does: an XML error body, its request id in a header too.
func writeError(w http.ResponseWriter, req *http.Request, f *Fault) {
	id := rand.Text()[:16]
	body, _ := xml.Marshal(struct {
		XMLName   xml.Name `xml:"Error"`
		Code      string
		Message   string
		Resource  string
		RequestID string `xml:"RequestId"`
	}{Code: f.Code, Message: f.Message, Resource: req.URL.Path, RequestID: id})
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", id)
	w.WriteHeader(f.Status)
	_, _ = w.Write(append([]byte(xml.Header), body...))
}

// errCut is the read error that makes the reverse proxy drop the client's connection.
var errCut = errors.New("faultproxy: the response body is cut here")

// faultyBody passes After bytes of a response's body, then cuts or stalls it.
type faultyBody struct {
	r    io.ReadCloser
	f    *Fault
	ctx  context.Context
	sent int64
}

func (b *faultyBody) Read(p []byte) (int, error) {
	if left := b.f.After - b.sent; left <= 0 {
		if b.f.StallBody {
			<-b.ctx.Done() // the client gave up
			return 0, b.ctx.Err()
		}
		return 0, errCut
	} else if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.r.Read(p)
	b.sent += int64(n)
	return n, err
}

func (b *faultyBody) Close() error { return b.r.Close() }

// The kinds of S3 request, for rules and Seen.

// PartUpload is a part of a multipart upload (PUT ?partNumber&uploadId).
func PartUpload(r *http.Request) bool {
	q := r.URL.Query()
	return r.Method == http.MethodPut && q.Has("uploadId") && q.Has("partNumber")
}

// Put is a single PUT of a whole object.
func Put(r *http.Request) bool {
	return r.Method == http.MethodPut && !r.URL.Query().Has("uploadId")
}

// StartUpload is the start of a multipart upload (POST ?uploads).
func StartUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Query().Has("uploads")
}

// CompleteUpload is the completion of a multipart upload (POST ?uploadId).
func CompleteUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Query().Has("uploadId")
}

// AbortUpload is the abort of a multipart upload (DELETE ?uploadId).
func AbortUpload(r *http.Request) bool {
	return r.Method == http.MethodDelete && r.URL.Query().Has("uploadId")
}

// Get is a GET of an object (a ranged read), not a listing.
func Get(r *http.Request) bool {
	q := r.URL.Query()
	return r.Method == http.MethodGet && !q.Has("list-type") && !q.Has("uploads") && !q.Has("location") && !q.Has("prefix")
}
