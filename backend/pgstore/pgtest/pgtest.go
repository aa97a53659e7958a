// Package pgtest starts PostgreSQL servers for tests that need one:
// pgstore's own, and those of programs built on pgstore (the example
// server's). Each is a private cluster in a temporary directory, listening on a free port of
// 127.0.0.1 only (no Unix socket), with trust authentication, stopped by
// its process id when the tests end. When the tests run as root, whom
// initdb refuses, the server's programs run as the postgres user. A
// Proxy in front of a server loses the answers to COMMITs, for tests of
// a network that fails at that moment.
//
// The programs are looked for in $BLOCKRPC_PG_BIN, or else in Debian's
// directory of PostgreSQL 15 (DefaultBinDir). Without them the tests skip,
// unless $BLOCKRPC_PG_REQUIRED is set (as make test sets it), when they
// fail.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables the harness reads.
const (
	BinDirEnv   = "BLOCKRPC_PG_BIN"
	RequiredEnv = "BLOCKRPC_PG_REQUIRED"
	// URLEnv, when set, is the URL of a server to use instead of starting
	// one: how the subprocesses of a test reach the parent's server.
	URLEnv = "BLOCKRPC_PG_URL"
	// BaseBackupEnv, when set, is the pg_basebackup program Standby runs
	// instead of BinDir's: one of a newer version copies an older server,
	// for a build of the server that comes without it.
	BaseBackupEnv = "BLOCKRPC_PG_BASEBACKUP"
)

// DefaultBinDir is where Debian's postgresql-15 package puts the server's
// programs.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// BinDir returns the directory of PostgreSQL's programs.
func BinDir() string {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d
	}
	return DefaultBinDir
}

// Available reports whether the programs a server needs are there, and if
// not why.
func Available() error { return findPrograms("initdb", "postgres") }

// StandbyAvailable reports whether the program Standby needs is there,
// and if not why.
func StandbyAvailable() error {
	if p := os.Getenv(BaseBackupEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s names %s: %w", BaseBackupEnv, p, err)
		}
		return nil
	}
	return findPrograms("pg_basebackup")
}

// baseBackup is the pg_basebackup program Standby runs.
func baseBackup() string {
	if p := os.Getenv(BaseBackupEnv); p != "" {
		return p
	}
	return filepath.Join(BinDir(), "pg_basebackup")
}

func findPrograms(names ...string) error {
	for _, p := range names {
		if _, err := os.Stat(filepath.Join(BinDir(), p)); err != nil {
			return fmt.Errorf("PostgreSQL's %s not found in %s (set %s, or install PostgreSQL 15: make postgres): %w", p, BinDir(), BinDirEnv, err)
		}
	}
	return nil
}

// Server is a PostgreSQL server this process started.
type Server struct {
	Dir  string // the data directory
	Port int
	root string // the temporary directory holding Dir, removed by Stop

	cred *syscall.Credential // nil: run as this user
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	stop sync.Once
}

// Config is the server's settings beyond the harness's own.
type Config struct {
	// Settings are passed as -c name=value.
	Settings map[string]string
}

// Fast are settings for tests: durability off, which they do not need,
// and huge pages off, left to whatever else runs on the machine (a
// benchmark's server among them).
var Fast = map[string]string{
	"fsync":              "off",
	"synchronous_commit": "off",
	"full_page_writes":   "off",
	"max_connections":    "200",
	"huge_pages":         "off",
}

// credential returns the postgres user's credentials when this process
// runs as root, and nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, initdb needs another user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// command runs a program of BinDir, or the one a path names, as the
// server's user. Its parent's death kills it, so that a test process that
// dies leaves no server.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	if !strings.Contains(name, "/") {
		name = filepath.Join(BinDir(), name)
	}
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.Dir = s.root
	return cmd
}

// run runs a program to its end, and returns its output with the error.
func (s *Server) run(name string, args ...string) error {
	cmd := s.command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out.Bytes())
	}
	return nil
}

// dirPrefix names the temporary directories of the servers.
const dirPrefix = "pgstore-pg-"

// ownerFile holds, in a server's temporary directory, the process id of
// the test process that made it.
const ownerFile = "owner.pid"

// sweep removes the directories that test processes which are gone (killed
// before they could stop their servers, whose parent-death signal stopped
// them) left behind.
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// newDir makes the temporary directory of a server, which its user owns.
func newDir(cred *syscall.Credential) (string, error) {
	root, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(root)
		return "", err
	}
	if cred != nil {
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(root)
			return "", err
		}
		// The postgres user must reach it through its parents.
		for d := filepath.Dir(root); ; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
				os.RemoveAll(root)
				return "", fmt.Errorf("the postgres user cannot reach %s: %s is not searchable by others (set TMPDIR elsewhere)", root, d)
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return root, nil
}

// Start makes a new cluster with initdb and starts it.
func Start(cfg Config) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	root, err := newDir(cred)
	if err != nil {
		return nil, err
	}
	s := &Server{root: root, Dir: filepath.Join(root, "data"), cred: cred}
	// With data checksums, as pgstore's README advises: records carry no
	// checksum of their own.
	if err := s.run("initdb", "-D", s.Dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync", "--data-checksums"); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if err := s.start(cfg); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return s, nil
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start starts the server of s.Dir on a free port, retrying when another
// process took the port in between.
func (s *Server) start(cfg Config) error {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.Port = port
		if lastErr = s.startOn(cfg); lastErr == nil {
			return nil
		}
	}
	return lastErr
}

func (s *Server) startOn(cfg Config) error {
	args := []string{"-D", s.Dir, "-p", strconv.Itoa(s.Port), "-h", "127.0.0.1", "-k", ""}
	for k, v := range cfg.Settings {
		args = append(args, "-c", k+"="+v)
	}
	log, err := os.Create(filepath.Join(s.root, fmt.Sprintf("postgres-%d.log", s.Port)))
	if err != nil {
		return err
	}
	cmd := s.command("postgres", args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	s.cmd, s.log, s.done = cmd, log, make(chan struct{})
	s.stop = sync.Once{}
	go func() { _ = cmd.Wait(); close(s.done) }()

	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited at start: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("postgres did not answer within a minute: %v\n%s", err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// URL returns the URL of database db on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// Pid returns the process id of the server (the postmaster).
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop stops the server by its process id, a fast shutdown and, when that
// takes more than 30 seconds, SIGKILL; then it removes the directory.
func (s *Server) Stop() error {
	var err error
	s.stop.Do(func() {
		err = s.halt()
		if rerr := os.RemoveAll(s.root); err == nil {
			err = rerr
		}
	})
	return err
}

// Halt stops the server as Stop does, but keeps its directory, so that
// Restart can start it again: for tests of what clients do while their
// server is down. Stop still removes the directory.
func (s *Server) Halt() error { return s.halt() }

// Restart starts a halted server again, on the port it had.
func (s *Server) Restart(cfg Config) error { return s.startOn(cfg) }

func (s *Server) halt() error {
	var err error
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			err = errors.New("postgres did not stop within 30s and was killed")
		}
	}
	if s.log != nil {
		s.log.Close()
	}
	return err
}

// Standby makes a streaming-replication standby of s with pg_basebackup
// (hot standby, the default), and starts it.
func (s *Server) Standby(cfg Config) (*Server, error) {
	if err := StandbyAvailable(); err != nil {
		return nil, err
	}
	root, err := newDir(s.cred)
	if err != nil {
		return nil, err
	}
	sb := &Server{root: root, Dir: filepath.Join(root, "data"), cred: s.cred}
	err = sb.run(baseBackup(), "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres",
		"-D", sb.Dir, "-X", "stream", "-c", "fast", "--no-sync")
	if err == nil {
		err = sb.configureStandby(s.Port)
	}
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if err := sb.start(cfg); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	return sb, nil
}

// configureStandby makes the copied cluster a standby of the primary on
// port, as pg_basebackup -R would, but with a connection string of the
// options every version knows: -R writes each one its own libpq has, and
// a server older than it refuses to start on those it does not know.
// Before version 12 the settings go in recovery.conf, since then in the
// configuration with a standby.signal file beside it.
func (s *Server) configureStandby(primaryPort int) error {
	v, err := os.ReadFile(filepath.Join(s.Dir, "PG_VERSION"))
	if err != nil {
		return err
	}
	major, err := strconv.Atoi(strings.TrimSpace(string(v)))
	if err != nil {
		return fmt.Errorf("PG_VERSION of the standby: %q", v)
	}
	conninfo := fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres'\n", primaryPort)
	files := map[string]string{"standby.signal": "", "postgresql.auto.conf": conninfo}
	if major < 12 {
		files = map[string]string{"recovery.conf": "standby_mode = 'on'\n" + conninfo}
	}
	for name, text := range files {
		path := filepath.Join(s.Dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		_, err = f.WriteString(text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && s.cred != nil {
			err = os.Chown(path, int(s.cred.Uid), int(s.cred.Gid))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CreateDatabase creates a database on the server and returns its URL.
func (s *Server) CreateDatabase(name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return s.URL(name), nil
}

var (
	shared    *Server
	sharedURL string
	sharedErr error
	schemas   struct {
		sync.Mutex
		n int
	}
)

// Main runs a test binary's tests with a shared server: the one URLEnv
// names, or one started here and stopped when the tests end, whatever
// their outcome. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	if url := os.Getenv(URLEnv); url != "" {
		sharedURL = url
		return m.Run()
	}
	if err := Available(); err != nil {
		if os.Getenv(RequiredEnv) != "" {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			return 1
		}
		sharedErr = err
		return m.Run()
	}
	sweep()
	s, err := Start(Config{Settings: Fast})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest: starting PostgreSQL:", err)
		return 1
	}
	shared = s
	sharedURL, err = s.CreateDatabase("blockrpc")
	if err != nil {
		s.Stop()
		fmt.Fprintln(os.Stderr, "pgtest: creating the database:", err)
		return 1
	}
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Shared returns the shared server (nil when it was given by URLEnv) and
// the URL of its test database, or skips t when there is none.
func Shared(t testing.TB) (*Server, string) {
	t.Helper()
	if sharedURL == "" {
		if sharedErr != nil {
			t.Skip("pgtest:", sharedErr)
		}
		t.Fatal("pgtest: no server: call pgtest.Main from TestMain")
	}
	return shared, sharedURL
}

// Schema returns a schema name not used before by this process, for a
// fresh, empty store.
func Schema(t testing.TB) string {
	schemas.Lock()
	defer schemas.Unlock()
	schemas.n++
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("t%d_%d_%s", os.Getpid(), schemas.n, name)
}

// Connect opens a connection of the test's own to url, closed when the
// test ends: for what a test does on the server beside the code it tests.
func Connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}
