package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blockrpc/blockrpc"
	"github.com/blockrpc/blockrpc/keystore"
	"golang.org/x/time/rate"
)

// The page is three static files served from the binary itself: no CDN, no
// build step, and a Content-Security-Policy that allows nothing else.
//
//go:embed dashboard/index.html dashboard/app.js dashboard/style.css
var dashboardFiles embed.FS

const dashboardPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// dashboard serves the API of keys and the page that uses it, on the admin
// listener. Every request is authorized by the admin token, sent as a
// bearer token by scripts, or by a session the page signed in with it.
type dashboard struct {
	log   *slog.Logger
	store keystore.Store
	keys  *keystore.Keys
	token [sha256.Size]byte // the admin token's digest: compared in constant time
	// generatedToken is the token the server made for this run, to be
	// printed once; "" for the operator's own.
	generatedToken string

	mu       sync.Mutex
	sessions map[[sha256.Size]byte]session // by the digest of the cookie's value
	// guesses slows a guesser of the admin token down, by remote host:
	// past a burst of wrong tokens, a host's next tokens, right or wrong,
	// are refused without being checked until its allowance refills,
	// where a 429 for a wrong token alone would still tell a right one.
	// The token's owner, from another host, is not held up.
	guessMu sync.Mutex
	guesses map[string]*rate.Limiter
}

// Wrong admin tokens a host may send: a burst, then one a second. Past
// maxGuessers hosts, those whose allowance is whole are let go, and new
// ones beyond that share one allowance, so that the map stays bounded.
const (
	guessBurst  = 10
	guessEvery  = time.Second
	maxGuessers = 4096
)

type session struct {
	csrf    string
	expires time.Time
}

const (
	sessionCookie   = "blockrpc_admin"
	sessionLifetime = 12 * time.Hour
	csrfHeader      = "X-CSRF-Token"
	// maxAdminBody bounds a request body of the API: a label and two
	// numbers need far less.
	maxAdminBody = 16 << 10
	// chartHistory is how far back a key's per-minute counts go.
	chartHistory = keystore.History
)

func newDashboard(log *slog.Logger, store keystore.Store, keys *keystore.Keys, token string) *dashboard {
	return &dashboard{
		log:      log,
		store:    store,
		keys:     keys,
		token:    sha256.Sum256([]byte(token)),
		sessions: make(map[[sha256.Size]byte]session),
		guesses:  make(map[string]*rate.Limiter),
	}
}

func (d *dashboard) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", d.file("dashboard/index.html"))
	mux.HandleFunc("GET /app.js", d.file("dashboard/app.js"))
	mux.HandleFunc("GET /style.css", d.file("dashboard/style.css"))
	mux.HandleFunc("GET /api/session", d.getSession)
	mux.HandleFunc("POST /api/session", d.signIn)
	mux.HandleFunc("DELETE /api/session", d.authorized(true, d.signOut))
	mux.HandleFunc("GET /api/keys", d.authorized(false, d.list))
	mux.HandleFunc("POST /api/keys", d.authorized(true, d.create))
	mux.HandleFunc("GET /api/keys/{id}", d.authorized(false, d.show))
	mux.HandleFunc("PATCH /api/keys/{id}", d.authorized(true, d.update))
	mux.HandleFunc("DELETE /api/keys/{id}", d.authorized(true, d.revoke))
	// Anything else under /api/ is JSON too, not the mux's plain text.
	for path, allow := range map[string]string{
		"/api/session":   "GET, POST, DELETE",
		"/api/keys":      "GET, POST",
		"/api/keys/{id}": "GET, PATCH, DELETE",
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			apiError(w, http.StatusMethodNotAllowed, r.Method+" is not a method of "+r.URL.Path+": "+allow)
		})
	}
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "no such route: "+r.Method+" "+r.URL.Path)
	})
}

func (d *dashboard) file(name string) http.HandlerFunc {
	data, err := dashboardFiles.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: cannot be missing
	}
	contentType := mime.TypeByExtension(name[strings.LastIndexByte(name, '.'):])
	if strings.HasSuffix(name, ".js") {
		contentType = "text/javascript; charset=utf-8" // whatever the system's MIME table says
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Security-Policy", dashboardPolicy)
		h.Set("X-Frame-Options", "DENY") // frame-ancestors, for browsers without it
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		w.Write(data)
	}
}

// actor names who made a change in the audit log: the admin token, or a
// session by a short digest of its cookie, never the secret itself.
type actor string

// authorized runs next for a request that carries the admin token or the
// cookie of a session; a change by a session must also carry the session's
// CSRF token, which only the page can read.
func (d *dashboard) authorized(change bool, next func(http.ResponseWriter, *http.Request, actor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if auth := r.Header.Get("Authorization"); auth != "" {
			token, ok := strings.CutPrefix(auth, "Bearer ")
			if !d.checkToken(w, r, ok, token, "a wrong admin token") {
				return
			}
			next(w, r, "token")
			return
		}
		s, id, ok := d.session(r)
		if !ok {
			apiError(w, http.StatusUnauthorized, "sign in, or send the admin token as Authorization: Bearer <token>")
			return
		}
		if change && subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(s.csrf)) != 1 {
			apiError(w, http.StatusForbidden, "missing or wrong "+csrfHeader+" header: reload the page")
			return
		}
		next(w, r, actor("session "+id))
	}
}

func (d *dashboard) isToken(token string) bool {
	digest := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(digest[:], d.token[:]) == 1
}

// checkToken reports whether token is the admin token (given tells
// whether one was sent at all), and otherwise answers: 429, the token
// unchecked, for a host that has sent too many wrong ones of late; 401
// for a wrong one, counted against the host and logged with the remote
// address (never what was sent), since an operator should hear of
// guessing. The allowance is read and spent in one step, so that
// requests held open together (sign-ins whose bodies come late) cannot
// all pass it before any spends it.
func (d *dashboard) checkToken(w http.ResponseWriter, r *http.Request, given bool, token, what string) bool {
	d.guessMu.Lock()
	guesser := d.guesser(remoteHost(r))
	spent := d.spent(guesser)
	right := !spent && given && d.isToken(token)
	allowed := spent || right || d.guessesOf(guesser).Allow()
	d.guessMu.Unlock()
	if right {
		return true
	}
	if !spent {
		d.log.Warn("admin: refused "+what, "remote", r.RemoteAddr, "path", r.URL.Path)
	}
	if spent || !allowed {
		apiError(w, http.StatusTooManyRequests, tooManyGuesses)
	} else {
		apiError(w, http.StatusUnauthorized, "wrong admin token")
	}
	return false
}

// tooManyGuesses answers a host past its allowance of wrong tokens.
const tooManyGuesses = "too many wrong admin tokens: wait a moment"

// spent reports whether guesser has sent too many wrong tokens of late;
// d.guessMu is held.
func (d *dashboard) spent(guesser string) bool {
	l, ok := d.guesses[guesser]
	return ok && l.Tokens() < 1
}

// guessing answers 429, without reading the request further, a request
// of a host that has sent too many wrong tokens of late, and reports
// whether it did: checkToken decides, this spares a body's read.
func (d *dashboard) guessing(w http.ResponseWriter, r *http.Request) bool {
	d.guessMu.Lock()
	spent := d.spent(d.guesser(remoteHost(r)))
	d.guessMu.Unlock()
	if spent {
		apiError(w, http.StatusTooManyRequests, tooManyGuesses)
	}
	return spent
}

// guesser returns whose allowance of wrong tokens host's are: its own,
// or, past maxGuessers hosts once those whose allowance is whole are let
// go, the one the hosts past the bound share (""). Checking and spending
// both go through it, so that a host past the bound is held back by the
// shared allowance it spends; d.guessMu is held.
func (d *dashboard) guesser(host string) string {
	if _, ok := d.guesses[host]; ok || len(d.guesses) < maxGuessers {
		return host
	}
	for h, l := range d.guesses {
		if h != "" && l.Tokens() >= guessBurst {
			delete(d.guesses, h)
		}
	}
	if len(d.guesses) < maxGuessers {
		return host
	}
	return ""
}

// guessesOf returns the allowance of wrong tokens of guesser (see
// guesser); d.guessMu is held.
func (d *dashboard) guessesOf(guesser string) *rate.Limiter {
	if l, ok := d.guesses[guesser]; ok {
		return l
	}
	l := rate.NewLimiter(rate.Every(guessEvery), guessBurst)
	d.guesses[guesser] = l
	return l
}

// remoteHost is the host of a request's remote address, without its port.
func remoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// session returns the live session of the request's cookie, and a short id
// of it for the audit log.
func (d *dashboard) session(r *http.Request) (session, string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, "", false
	}
	digest := sha256.Sum256([]byte(c.Value))
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.sessions[digest]
	if !ok || time.Now().After(s.expires) {
		delete(d.sessions, digest)
		return session{}, "", false
	}
	return s, hex.EncodeToString(digest[:4]), true
}

func (d *dashboard) getSession(w http.ResponseWriter, r *http.Request) {
	s, _, ok := d.session(r)
	if !ok {
		apiError(w, http.StatusUnauthorized, "not signed in")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"csrf": s.csrf})
}

func (d *dashboard) signIn(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Token string `json:"token"`
	}
	if d.guessing(w, r) || !readJSON(w, r, &in) {
		return
	}
	if !d.checkToken(w, r, true, in.Token, "a sign-in with a wrong admin token") {
		return
	}
	cookie, csrf := randomHex(32), randomHex(32)
	digest := sha256.Sum256([]byte(cookie))
	now := time.Now()
	d.mu.Lock()
	for k, s := range d.sessions {
		if now.After(s.expires) {
			delete(d.sessions, k)
		}
	}
	d.sessions[digest] = session{csrf: csrf, expires: now.Add(sessionLifetime)}
	d.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name:     sessionCookie,
		Value:    cookie,
		Path:     "/",
		MaxAge:   int(sessionLifetime / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	d.log.Info("admin: signed in", "session", hex.EncodeToString(digest[:4]), "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"csrf": csrf})
}

func (d *dashboard) signOut(w http.ResponseWriter, r *http.Request, who actor) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		d.mu.Lock()
		delete(d.sessions, sha256.Sum256([]byte(c.Value)))
		d.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	d.log.Info("admin: signed out", "by", string(who))
	w.WriteHeader(http.StatusNoContent)
}

// keyJSON is a key as the API shows it: never the key itself, but once,
// in the answer that creates it.
type keyJSON struct {
	ID       string       `json:"id"`
	Key      string       `json:"key,omitempty"`
	Label    string       `json:"label"`
	Rate     float64      `json:"rate"`
	Burst    int          `json:"burst"`
	Created  time.Time    `json:"created"`
	Revoked  *time.Time   `json:"revoked"`
	Requests int64        `json:"requests"`
	Errors   int64        `json:"errors"`
	Bytes    int64        `json:"bytes"`
	LastUsed *time.Time   `json:"last_used"`
	Minutes  []minuteJSON `json:"minutes,omitempty"`
}

type minuteJSON struct {
	Start    time.Time `json:"start"`
	Requests int64     `json:"requests"`
	Errors   int64     `json:"errors"`
}

func toJSON(k keystore.Key) keyJSON {
	j := keyJSON{
		ID: k.ID, Label: k.Label, Rate: k.Rate, Burst: k.Burst, Created: k.Created.UTC(),
		Requests: k.Used.Requests, Errors: k.Used.Errors, Bytes: k.Used.Bytes,
	}
	if !k.Revoked.IsZero() {
		t := k.Revoked.UTC()
		j.Revoked = &t
	}
	if !k.Used.LastUsed.IsZero() {
		t := k.Used.LastUsed.UTC()
		j.LastUsed = &t
	}
	return j
}

// flushUsage writes this process's counts before an answer that shows
// usage, so that the page is current for this process at least; other
// processes' counts arrive with their next flush. A store slow to take
// them (locked rows, a stalled disk) delays the answer by usageFlushWait
// at most: the page then shows the counts stored, and the next flush
// takes these.
func (d *dashboard) flushUsage(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, usageFlushWait)
	defer cancel()
	if err := d.keys.Flush(ctx); err != nil {
		d.log.Warn("admin: the usage of keys could not be written", "err", err)
	}
}

const usageFlushWait = 2 * time.Second

func (d *dashboard) list(w http.ResponseWriter, r *http.Request, _ actor) {
	d.flushUsage(r.Context())
	keys, err := d.store.Keys(r.Context())
	if err != nil {
		d.storeError(w, "listing keys", err)
		return
	}
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		out[i] = toJSON(k)
	}
	writeJSON(w, http.StatusOK, map[string][]keyJSON{"keys": out})
}

func (d *dashboard) show(w http.ResponseWriter, r *http.Request, _ actor) {
	d.flushUsage(r.Context())
	id := r.PathValue("id")
	k, err := d.store.Key(r.Context(), id)
	if err != nil {
		d.storeError(w, "reading a key", err)
		return
	}
	minutes, err := d.store.Minutes(r.Context(), id, time.Now().Add(-chartHistory))
	if err != nil {
		d.storeError(w, "reading a key's usage", err)
		return
	}
	j := toJSON(k)
	j.Minutes = make([]minuteJSON, len(minutes))
	for i, m := range minutes {
		j.Minutes[i] = minuteJSON{Start: m.Start.UTC(), Requests: m.Requests, Errors: m.Errors}
	}
	writeJSON(w, http.StatusOK, j)
}

// limitsJSON is what a request may set of a key. Pointers tell a field
// left out from one set to 0.
type limitsJSON struct {
	Label *string  `json:"label"`
	Rate  *float64 `json:"rate"`
	Burst *int     `json:"burst"`
}

func (d *dashboard) create(w http.ResponseWriter, r *http.Request, who actor) {
	var in limitsJSON
	if !readJSON(w, r, &in) {
		return
	}
	label, rate, burst := "", 0.0, 0
	if in.Label != nil {
		label = *in.Label
	}
	if in.Rate != nil {
		rate = *in.Rate
	}
	if in.Burst != nil {
		burst = *in.Burst
	}
	secret, k, err := keystore.NewKey(label, rate, burst, time.Now())
	if err != nil {
		apiError(w, http.StatusUnprocessableEntity, userMessage(err))
		return
	}
	if err := d.store.Create(r.Context(), k); err != nil {
		d.storeError(w, "creating a key", err)
		return
	}
	d.audit(r.Context(), who, "create", k, "label", k.Label, "rate", k.Rate, "burst", k.Burst)
	j := toJSON(k)
	j.Key = secret
	writeJSON(w, http.StatusCreated, j)
}

func (d *dashboard) update(w http.ResponseWriter, r *http.Request, who actor) {
	var in limitsJSON
	if !readJSON(w, r, &in) {
		return
	}
	id := r.PathValue("id")
	var c keystore.Change
	c.Label = in.Label
	if in.Rate != nil || in.Burst != nil {
		limit := blockrpc.Limit{}
		if in.Rate != nil {
			limit.Rate = *in.Rate
		} else {
			// A burst alone keeps the key's rate.
			k, err := d.store.Key(r.Context(), id)
			if err != nil {
				d.storeError(w, "reading a key", err)
				return
			}
			limit.Rate = k.Rate
		}
		if in.Burst != nil {
			limit.Burst = *in.Burst
		}
		c.Limit = &limit
	}
	if c.Label == nil && c.Limit == nil {
		apiError(w, http.StatusUnprocessableEntity, `nothing to change: send "label", "rate" or "burst"`)
		return
	}
	// The store checks the values first: storeError answers them 422.
	k, err := d.store.Update(r.Context(), id, c)
	if err != nil {
		d.storeError(w, "changing a key", err)
		return
	}
	var changed []any
	if c.Label != nil {
		changed = append(changed, "label", k.Label)
	}
	if c.Limit != nil {
		changed = append(changed, "rate", k.Rate, "burst", k.Burst)
	}
	d.audit(r.Context(), who, "update", k, changed...)
	writeJSON(w, http.StatusOK, toJSON(k))
}

func (d *dashboard) revoke(w http.ResponseWriter, r *http.Request, who actor) {
	k, err := d.store.Revoke(r.Context(), r.PathValue("id"), time.Now())
	if err != nil {
		d.storeError(w, "revoking a key", err)
		return
	}
	d.audit(r.Context(), who, "revoke", k, "revoked_at", k.Revoked)
	writeJSON(w, http.StatusOK, toJSON(k))
}

// audit logs a change by its key's id in the store (the dashboard's), its
// key_id (the access log's: the first 4 bytes of its SHA-256) and what
// changed, and applies it in this process at once: the others read it
// within their refresh interval.
func (d *dashboard) audit(ctx context.Context, who actor, action string, k keystore.Key, changed ...any) {
	d.log.Info("admin: "+action, append([]any{"id", k.ID, "key_id", k.Digest.String()[:8], "by", string(who)}, changed...)...)
	// The change is made: it applies here whether or not the client waits
	// for the answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := d.keys.Refresh(ctx); err != nil {
		d.log.Warn("admin: the keys could not be read again after a change: it applies at the next refresh", "err", err)
	}
}

// storeError answers a failed call of the store: the contract's errors by
// their status, anything else as the store being unavailable, logged in
// full for the operator.
func (d *dashboard) storeError(w http.ResponseWriter, doing string, err error) {
	switch {
	case errors.Is(err, keystore.ErrNotFound):
		apiError(w, http.StatusNotFound, "no key with that id")
	case errors.Is(err, keystore.ErrRevoked):
		apiError(w, http.StatusConflict, "the key is revoked: a revoked key cannot be changed")
	case errors.Is(err, keystore.ErrLabel), errors.Is(err, keystore.ErrLimit):
		apiError(w, http.StatusUnprocessableEntity, userMessage(err))
	default:
		d.log.Error("admin: the key store failed "+doing, "err", err)
		apiError(w, http.StatusServiceUnavailable, "the key store is unavailable: "+doing+" failed")
	}
}

// userMessage is a keystore error without its package's prefix.
func userMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "keystore: ")
}

// readJSON decodes a request body of one JSON object into v, answering
// and reporting false for anything else.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		apiError(w, http.StatusUnsupportedMediaType, "the body must be JSON, sent as Content-Type: application/json")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("text after the JSON object")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxAdminBody))
		return false
	case err != nil:
		apiError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"error": message})
}

// randomHex returns n random bytes in hex: a generated API key or admin
// token (16 bytes, as providers' keys), or a session's secrets.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails: crypto/rand panics rather than return less
	return hex.EncodeToString(b)
}
