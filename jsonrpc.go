package blockrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxMethodName bounds the method name echoed in an error, as go-ethereum's.
const maxMethodName = 2048

// request is one JSON-RPC message object, as raw JSON values sliced from
// the body.
type request struct {
	version, method, id, params []byte
	result, errorMember         []byte // present only in a response
}

func (q *request) validVersion() bool {
	return string(stringText(q.version)) == "2.0"
}

// validID reports whether the id can be echoed: any JSON value but an
// object or an array, as go-ethereum accepts.
func (q *request) validID() bool {
	return q.id != nil && q.id[0] != '{' && q.id[0] != '['
}

// serveJSONRPC answers a request body, single or batch. Like go-ethereum it
// reads the first JSON value of the body and ignores what follows. Nothing
// is answered when there is nothing to answer (notifications, responses).
func (h *Handler) serveJSONRPC(ctx context.Context, body []byte, a *answerWriter, info *RequestInfo, c caller) {
	out := a.out()
	start := skipSpace(body, 0)
	if start == len(body) {
		*out = appendError(*out, nil, codeParseError, "parse error")
		a.errors, a.bare = 1, true
		return
	}
	// valueEnd only scans, so the span it finds is checked before use.
	end := valueEnd(body, start)
	if !json.Valid(body[start:end]) {
		*out = appendError(*out, nil, codeParseError, "parse error")
		a.errors, a.bare = 1, true
		return
	}
	body = body[start:end]
	if body[0] != '[' {
		if info != nil {
			info.Calls = 1
			info.Method = h.served(classifiedName(body))
		}
		if h.allow(ctx, a, c, body, 1) {
			if h.sharing {
				ctx = context.WithValue(ctx, sharedResultKey{}, &a.shared)
			}
			mark := len(*out)
			*out = h.answer(ctx, body, *out)
			a.noteAnswer((*out)[mark:])
		}
		return
	}
	elements, count := batchElements(body, h.cfg.batchLimit)
	if info != nil {
		info.Batch, info.Calls = true, count
	}
	switch {
	case count == 0:
		*out = appendError(*out, nil, codeInvalidRequest, "empty batch")
		a.errors, a.bare = 1, true
	case len(elements) < count:
		*out = h.refuseBatch(body, *out, codeInvalidRequest, "batch too large")
		a.errors, a.bare = 1, true
	case h.allow(ctx, a, c, body, count):
		h.batch(ctx, body, elements, a)
	}
}

// batch answers a batch: the answers in the order of the calls, without
// those of notifications and responses, written as they are produced.
func (h *Handler) batch(ctx context.Context, batch []byte, elements [][2]int, a *answerWriter) {
	out := a.out()
	answered, size := 0, 0
	for _, e := range elements {
		if a.err != nil {
			return // the client is gone: the rest would be rendered for nobody
		}
		slotErr := a.acquireSlot(ctx)
		element := batch[e[0]:e[1]]
		before := len(*out)
		if answered == 0 {
			*out = append(*out, '[')
		} else {
			*out = append(*out, ',')
		}
		start := len(*out)
		switch {
		case slotErr != nil || ctx.Err() != nil:
			// A batch ends with its deadline: the calls left are
			// answered, not run.
			code, message := h.errorCode(ctx, ctx.Err(), "")
			*out = h.refuseCall(element, *out, code, message)
			h.observeCall(ctx, element, (*out)[start:], time.Now(), 0)
		case h.cfg.responseLimit > 0 && size > h.cfg.responseLimit:
			*out = h.refuseCall(element, *out, codeResponseTooLarge, "response too large")
			a.bare = true // go-ethereum's answer to a batch it cut short
			h.observeCall(ctx, element, (*out)[start:], time.Now(), 0)
		default:
			*out = h.answer(ctx, element, *out)
			size += payloadSize((*out)[start:])
		}
		if len(*out) == start {
			*out = (*out)[:before] // nothing to answer: no separator either
			continue
		}
		answered++
		a.noteAnswer((*out)[start:])
		a.flushFull()
	}
	if answered > 0 {
		*out = append(*out, ']')
	}
}

// batchElements returns the spans of a batch's elements and how many there
// are, keeping no more spans than limit allows: a batch too large is refused
// before anything is kept of it.
func batchElements(batch []byte, limit int) ([][2]int, int) {
	var elements [][2]int
	count := 0
	for i := skipSpace(batch, 1); batch[i] != ']'; count++ {
		end := valueEnd(batch, i)
		if limit <= 0 || count < limit {
			elements = append(elements, [2]int{i, end})
		}
		i = nextMember(batch, end)
	}
	return elements, count
}

// refuseBatch answers a batch refused whole (more calls than the limit):
// the protocol cannot fail a batch as a whole, so, like go-ethereum, with
// one error bearing the first call's id.
func (h *Handler) refuseBatch(batch, out []byte, code int, message string) []byte {
	var id []byte
	for i := skipSpace(batch, 1); batch[i] != ']'; {
		end := valueEnd(batch, i)
		if q, _, kind := classify(batch[i:end]); kind == call {
			id = q.id
			break
		}
		i = nextMember(batch, end)
	}
	out = append(out, '[')
	return append(appendError(out, id, code, message), ']')
}

// payloadSize is what go-ethereum counts of an answer against the response
// limit: the bytes of its result member; an error answer has none, and
// counts for nothing.
func payloadSize(answer []byte) int {
	if len(answer) == 0 {
		return 0
	}
	afterID := valueEnd(answer, len(`{"jsonrpc":"2.0","id":`))
	if !bytes.HasPrefix(answer[afterID:], []byte(`,"result":`)) {
		return 0
	}
	return len(answer) - afterID - len(`,"result":`) - len("}")
}

// A message object is a call, a notification (no id: never answered), a
// response (what a server would send: go-ethereum drops it unanswered) or
// invalid, by go-ethereum's rules.
const (
	invalid = iota
	call
	notification
	response
)

// classify also returns the method name; it is a slice of the body unless
// the name has escapes, so that looking it up allocates nothing.
func classify(raw []byte) (request, []byte, int) {
	q, ok := parseRequest(raw)
	name := stringText(q.method)
	switch {
	// As go-ethereum decodes a message: a method of "" or null is no
	// method, an error of null no error; a result of null is a result.
	case ok && q.validVersion() && q.validID() && len(name) == 0 && q.params == nil && (q.result != nil || (q.errorMember != nil && string(q.errorMember) != "null")):
		return q, name, response
	case !ok || !q.validVersion() || len(name) == 0:
		return q, name, invalid
	case q.id == nil:
		return q, name, notification
	case !q.validID():
		q.id = nil // answered with a null id
		return q, name, invalid
	}
	return q, name, call
}

// refuseCall answers a message with an error without running it, and a
// notification or response with nothing. Invalid messages get the error
// too, as go-ethereum gives them.
func (h *Handler) refuseCall(raw, out []byte, code int, message string) []byte {
	q, _, kind := classify(raw)
	if kind == notification || kind == response {
		return out
	}
	return appendError(out, echoedID(q), code, message)
}

// echoedID is the id to answer a message with: its own if valid, else null.
func echoedID(q request) []byte {
	if q.validID() {
		return q.id
	}
	return nil
}

// answer appends the answer to one request object (nothing for a
// notification), and tells the observer.
func (h *Handler) answer(ctx context.Context, raw, out []byte) []byte {
	if h.cfg.observer == nil || h.cfg.observer.Call == nil {
		return h.reply(ctx, raw, out)
	}
	start, mark := time.Now(), len(out)
	out = h.reply(ctx, raw, out)
	shared := 0
	if s, ok := ctx.Value(sharedResultKey{}).(*sharedResult); ok {
		shared = len(s.json)
	}
	h.observeCall(ctx, raw, out[mark:], start, shared)
	return out
}

// observeCall tells the observer of the answer to raw, begun at start,
// whose bytes are answer and shared more held apart (a cached result it
// refers to). A message not answered (a notification) is not told of.
func (h *Handler) observeCall(ctx context.Context, raw, answer []byte, start time.Time, shared int) {
	if len(answer) == 0 || h.cfg.observer == nil || h.cfg.observer.Call == nil {
		return
	}
	h.cfg.observer.Call(ctx, CallInfo{
		Method:   h.served(classifiedName(raw)),
		Code:     answerCode(answer),
		Duration: time.Since(start),
		Bytes:    len(answer) + shared,
	})
}

// served returns the name of a method the handler serves, and "" for any
// other name: what observers may use as a label.
func (h *Handler) served(name []byte) string {
	if _, ok := h.methods[string(name)]; ok {
		return string(name)
	}
	return ""
}

// classifiedName returns the method name of a message.
func classifiedName(raw []byte) []byte {
	_, name, _ := classify(raw)
	return name
}

// answerCode returns the error code of an answer, 0 for a result.
func answerCode(answer []byte) int {
	afterID := valueEnd(answer, len(`{"jsonrpc":"2.0","id":`))
	rest, ok := bytes.CutPrefix(answer[afterID:], []byte(`,"error":{"code":`))
	if !ok {
		return 0
	}
	code, _ := strconv.Atoi(string(rest[:valueEnd(rest, 0)]))
	return code
}

// reply appends the answer to one request object.
func (h *Handler) reply(ctx context.Context, raw, out []byte) []byte {
	q, name, kind := classify(raw)
	switch {
	case kind == invalid:
		return appendError(out, echoedID(q), codeInvalidRequest, "invalid request")
	case kind == notification || kind == response:
		return out // nothing is answered, so nothing is run
	// go-ethereum tells subscriptions apart before it checks the name's
	// length.
	case bytes.HasSuffix(name, []byte("_subscribe")):
		// Subscriptions need a connection that stays open; over HTTP
		// go-ethereum answers so.
		return appendError(out, q.id, codeMethodNotFound, "notifications not supported")
	case bytes.HasSuffix(name, []byte("_unsubscribe")):
		return h.call(ctx, unsubscribe, &q, out)
	}
	name = decodedUTF8(name)
	if len(name) > maxMethodName {
		return appendError(out, q.id, codeInvalidRequest, fmt.Sprintf("method name too long: %d > %d", len(name), maxMethodName))
	}
	m, found := h.methods[string(name)]
	if !found {
		return appendError(out, q.id, codeMethodNotFound, "the method "+string(name)+" does not exist/is not available")
	}
	return h.call(ctx, m, &q, out)
}

// decodedUTF8 returns a string's text as encoding/json decodes it for
// go-ethereum: each byte that is not part of valid UTF-8 becomes U+FFFD,
// which go-ethereum then counts and echoes.
func decodedUTF8(text []byte) []byte {
	if utf8.Valid(text) {
		return text
	}
	out := make([]byte, 0, len(text)+16)
	for len(text) > 0 {
		r, size := utf8.DecodeRune(text)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, text[:size]...)
		}
		text = text[size:]
	}
	return out
}

// call runs a method and appends its answer. A panic in the method (in a
// Backend, say) is recovered into an internal error, with whatever the
// method had written discarded.
func (h *Handler) call(ctx context.Context, m method, q *request, out []byte) (answer []byte) {
	mark := len(out)
	defer func() {
		if p := recover(); p != nil {
			h.log(ctx, slog.LevelError, "blockrpc: method handler crashed", "method", decodeString(q.method), "panic", p, "stack", string(debug.Stack()))
			dropShared(ctx)
			answer = appendError(out[:mark], q.id, codeInternalError, "method handler crashed")
		}
	}()
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = appendID(out, q.id)
	out = append(out, `,"result":`...)
	out, err := m(ctx, q.params, out)
	if err != nil {
		dropShared(ctx)
		code, message := h.errorCode(ctx, err, decodeString(q.method))
		return appendError(out[:mark], q.id, code, message)
	}
	return append(out, '}')
}

// appendID echoes an id as go-ethereum's encoder writes it: as given, but
// with <, >, & and the line and paragraph separators escaped.
func appendID(dst, id []byte) []byte {
	if bytes.ContainsAny(id, "<>&\u2028\u2029") {
		var escaped bytes.Buffer
		json.HTMLEscape(&escaped, id)
		return append(dst, escaped.Bytes()...)
	}
	return append(dst, id...)
}

// appendError appends an error answer; a nil id is null.
func appendError(dst, id []byte, code int, message string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if id == nil {
		id = []byte("null")
	}
	dst = appendID(dst, id)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	msg, _ := json.Marshal(message) // a string always marshals
	dst = append(dst, msg...)
	return append(dst, '}', '}')
}

// parseRequest slices the members of a message object. It reports false
// for a JSON value that is not an object.
func parseRequest(raw []byte) (request, bool) {
	var q request
	if len(raw) == 0 || raw[0] != '{' {
		return q, false
	}
	for i := skipSpace(raw, 1); raw[i] != '}'; {
		keyEnd := valueEnd(raw, i)
		key := raw[i+1 : keyEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = stringText(raw[i:keyEnd]) // rare: an escaped key
		}
		i = skipSpace(raw, skipSpace(raw, keyEnd)+1) // past the colon
		end := valueEnd(raw, i)
		value := raw[i:end]
		switch {
		// encoding/json leaves a string as it was for a value of another
		// kind, null included: go-ethereum keeps an earlier member then.
		case equalFold(key, "jsonrpc"):
			if value[0] == '"' {
				q.version = value
			}
		case equalFold(key, "method"):
			if value[0] == '"' {
				q.method = value
			}
		case equalFold(key, "id"):
			q.id = value
		case equalFold(key, "params"):
			q.params = value
		case equalFold(key, "result"):
			q.result = value
		case equalFold(key, "error"):
			q.errorMember = value
		}
		i = nextMember(raw, end)
	}
	return q, true
}
