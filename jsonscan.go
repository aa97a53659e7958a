package blockrpc

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The JSON reader. Requests are read by slicing the body, which json.Valid
// has already checked, instead of decoding it into values. It stays
// hand-written because it is measurably faster: BenchmarkReadRequest, in one
// run, reads a call in 0.12 µs with no allocation, where encoding/json
// decoding the same call into a struct of RawMessages takes 1.28 µs and 10
// allocations (a tenth of a hashes-only answer's whole cost).
// Keys match as encoding/json matches them (exact or case-insensitive, the
// last occurrence winning), which is how go-ethereum reads its requests.

// equalFold matches a member name as encoding/json does: exactly, or with
// Unicode case folding (so "ID" and "jſonrpc", with a long s, match too).
func equalFold(b []byte, name string) bool {
	return string(b) == name || strings.EqualFold(string(b), name)
}

// decodeString returns the text of a JSON string value, or "" for any other
// value.
func decodeString(raw []byte) string {
	return string(stringText(raw))
}

// stringText returns the text of a JSON string value, or nil for any other
// value: a slice of raw when the string has no escapes, decoded otherwise.
func stringText(raw []byte) []byte {
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	var s string
	json.Unmarshal(raw, &s) // valid JSON: the body was checked
	return []byte(s)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the JSON value that starts at
// data[i]. Nesting is counted, not recursed into, so no depth of input can
// exhaust the stack.
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				j = stringEnd(data, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(data)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return numberEnd(data, i)
	default: // a literal, or what is not JSON
		for _, word := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(data[i:], []byte(word)) {
				return i + len(word)
			}
		}
		j := i
		for j < len(data) && !isDelimiter(data[j]) {
			j++
		}
		return j
	}
}

// numberEnd returns the index just past the number that starts at
// data[i], where the grammar ends it, as encoding/json's Decoder (and so
// go-ethereum) reads a body: "1x" is the number 1 and what follows. A part
// the grammar cannot end ("1.", "1e+", "-") is kept, so that the number
// is found invalid.
func numberEnd(data []byte, i int) int {
	digits := func(j int) int {
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		return j
	}
	j := i
	if data[j] == '-' {
		j++
	}
	if j < len(data) && data[j] == '0' {
		j++
	} else {
		j = digits(j)
	}
	if j < len(data) && data[j] == '.' {
		j = digits(j + 1)
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		j = digits(j)
	}
	return j
}

// nextMember returns where the element or member after the one ending at
// end begins: past the separating comma, or at the closing bracket.
func nextMember(data []byte, end int) int {
	i := skipSpace(data, end)
	if data[i] == ',' {
		i = skipSpace(data, i+1)
	}
	return i
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}
