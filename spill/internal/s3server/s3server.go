// Package s3server starts a real S3-compatible server of a test's own, s3proxy with its
// filesystem backend on loopback, so that the test can kill it (SIGKILL, as a crash or an OOM
// kill would) and start it again on the same port and data: what a store that dies mid-upload or
// mid-read, and comes back, does to the remote tier. Test-only: nothing of the product imports it.
//
// It needs what project/s3-server.sh exports (make test-remote): SPILLWAY_S3_JAR, the s3proxy
// jar, and SPILLWAY_S3_ACCESS_KEY and SPILLWAY_S3_SECRET_KEY, which a server of a test uses too.
package s3server

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartTimeout bounds a start: the JVM's, on a busy machine.
const StartTimeout = 90 * time.Second

// Bucket is the bucket every server of a test holds, empty at first.
const Bucket = "spillway-fault"

// Server is an s3proxy process of a test.
type Server struct {
	Endpoint             string // http://127.0.0.1:<port>, the same across restarts
	AccessKey, SecretKey string
	// Data is the dir that holds the bucket's files in the backend, parts of uploads in progress
	// included; it outlives a kill.
	Data string

	t    testing.TB
	jar  string
	conf string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a server on a free loopback port with a basedir under t.TempDir(), and waits until
// it answers; it is killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	jar := os.Getenv("SPILLWAY_S3_JAR")
	if jar == "" {
		t.Fatal("SPILLWAY_S3_JAR is not set: run these tests through project/s3-server.sh (make test-remote)")
	}
	s := &Server{AccessKey: os.Getenv("SPILLWAY_S3_ACCESS_KEY"), SecretKey: os.Getenv("SPILLWAY_S3_SECRET_KEY"), t: t, jar: jar}
	if s.AccessKey == "" || s.SecretKey == "" {
		t.Fatal("SPILLWAY_S3_ACCESS_KEY and SPILLWAY_S3_SECRET_KEY are not set: run through project/s3-server.sh")
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "data")
	s.Data = filepath.Join(base, Bucket)
	if err := os.MkdirAll(s.Data, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(port)
	s.conf = filepath.Join(dir, "s3proxy.conf")
	s.log = filepath.Join(dir, "s3proxy.log")
	conf := fmt.Sprintf(`s3proxy.endpoint=%s
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=%s
s3proxy.credential=%s
jclouds.provider=filesystem
jclouds.identity=%s
jclouds.credential=%s
jclouds.filesystem.basedir=%s
`, s.Endpoint, s.AccessKey, s.SecretKey, s.AccessKey, s.SecretKey, base)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.Running() {
			s.Kill()
		}
	})
	s.start()
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start() {
	s.t.Helper()
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("java", "-jar", s.jar, "--properties", s.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting s3proxy: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)

	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(StartTimeout); ; {
		select {
		case <-s.done:
			s.t.Fatalf("s3proxy exited at start:\n%s", s.Log())
		default:
		}
		// Up once it answers HTTP at all (an unsigned request gets 403).
		if resp, err := client.Get(s.Endpoint + "/"); err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			s.Kill()
			s.t.Fatalf("s3proxy did not answer on %s within %v:\n%s", s.Endpoint, StartTimeout, s.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Running reports whether the server's process is alive.
func (s *Server) Running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Kill kills the server with SIGKILL, as a crash would: no request in flight is answered, nothing
// is flushed. It returns once the process is gone and its port refuses connections.
func (s *Server) Kill() {
	s.t.Helper()
	if !s.Running() {
		s.t.Fatal("s3server: Kill of a server that is not running")
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("s3proxy (pid %d) did not exit within 30 s of SIGKILL", s.cmd.Process.Pid)
	}
}

// Restart starts the server again after a Kill, on the same port and the same data, and waits
// until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	if s.Running() {
		s.t.Fatal("s3server: Restart of a server that is running; Kill it first")
	}
	s.start()
}

// Log is what the server has printed, its restarts included.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}
