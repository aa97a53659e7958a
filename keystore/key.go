package keystore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/blockrpc/blockrpc"
)

// A Key is an API key as a store keeps it: its digest, never the key.
type Key struct {
	// ID names the key in the store, the admin API and the logs. It is
	// random, and says nothing of the key.
	ID string
	// Digest is the SHA-256 of the key. Keys are random and long enough
	// (NewKey) that a digest cannot be turned back into its key.
	Digest Digest
	// Label is the operator's name for the key.
	Label string
	// Rate and Burst are the key's own limit: Rate calls a second, up to
	// Burst at once. Rate 0 leaves the key under the server's default.
	Rate  float64
	Burst int
	// Created is when the key was made, and Revoked when it was revoked
	// (zero while it is valid).
	Created, Revoked time.Time
	// Used is how much the key has been used, as far as its serving
	// processes have told the store.
	Used Totals
}

// Check checks that k has an id, and its label and limit as NewKey does
// (CheckLabel, CheckLimit): it trims the label's spaces and gives a rate
// without a burst its default burst. Store.Create checks a key so before
// it stores it.
func (k *Key) Check() error {
	if k.ID == "" {
		return ErrNoID
	}
	label, err := CheckLabel(k.Label)
	if err != nil {
		return err
	}
	rate, burst, err := CheckLimit(k.Rate, k.Burst)
	if err != nil {
		return err
	}
	k.Label, k.Rate, k.Burst = label, rate, burst
	return nil
}

// Totals are a key's usage since it was made.
type Totals struct {
	// Requests counts the HTTP requests made with the key and accepted,
	// Errors the error answers they got (see blockrpc.RequestInfo.Errors),
	// and Bytes the answer bytes written to them.
	Requests, Errors, Bytes int64
	// LastUsed is when the key was last used; zero if never.
	LastUsed time.Time
}

// Limit returns the key's own limit, and false when it has none.
func (k Key) Limit() (blockrpc.Limit, bool) {
	return blockrpc.Limit{Rate: k.Rate, Burst: k.Burst}, k.Rate > 0
}

// Valid reports whether the key has not been revoked.
func (k Key) Valid() bool { return k.Revoked.IsZero() }

// A Digest is the SHA-256 of an API key.
type Digest [sha256.Size]byte

// DigestOf returns the digest of key.
func DigestOf(key string) Digest { return sha256.Sum256([]byte(key)) }

// String returns the digest in hex, as blockrpc.RequestInfo.KeyDigest and a
// Limiter's ids give it.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// ParseDigest parses a digest in hex.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 2*len(d) {
		return d, fmt.Errorf("keystore: a digest is %d hex digits, not %d", 2*len(d), len(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("keystore: a digest is hex: %w", err)
	}
	return d, nil
}

// keyBytes is the randomness of a key: 128 bits, as the providers' keys
// have, too many to guess and to search from a digest.
const keyBytes = 16

// NewKey makes a new random key, labelled and limited as given. It returns
// the key itself, which only its caller ever sees, and the Key to store.
func NewKey(label string, rate float64, burst int, now time.Time) (secret string, k Key, err error) {
	if label, err = CheckLabel(label); err != nil {
		return "", Key{}, err
	}
	if rate, burst, err = CheckLimit(rate, burst); err != nil {
		return "", Key{}, err
	}
	var b [keyBytes]byte
	rand.Read(b[:]) // never fails: crypto/rand panics rather than return less
	secret = hex.EncodeToString(b[:])
	return secret, Key{
		ID:      newID(),
		Digest:  DigestOf(secret),
		Label:   label,
		Rate:    rate,
		Burst:   burst,
		Created: now.UTC().Truncate(time.Microsecond),
	}, nil
}

// newID returns a random id: 64 bits, enough that two keys never share one.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// MaxLabel is the longest label, in bytes.
const MaxLabel = 200

// MaxRate and MaxBurst bound a key's own limit: past them a limit means no
// limit, which a key without one of its own has already.
const (
	MaxRate  = 1e6
	MaxBurst = 1e6
)

// Errors of the values of a key. Each names the rule the value broke.
var (
	ErrNoID  = errors.New("keystore: a key needs an id")
	ErrLabel = errors.New("keystore: a label is at most 200 bytes of UTF-8 text, without control characters")
	ErrLimit = errors.New("keystore: a limit is a rate of 0 (none of its own) to 1000000 calls a second, and a burst of 1 to 1000000 calls with a rate, none without")
)

// CheckLabel returns label with the spaces around it trimmed, or ErrLabel.
func CheckLabel(label string) (string, error) {
	label = strings.TrimSpace(label)
	if len(label) > MaxLabel || !utf8.ValidString(label) || strings.IndexFunc(label, unicode.IsControl) >= 0 {
		return "", ErrLabel
	}
	return label, nil
}

// CheckLimit checks a key's own limit, and gives the burst its default,
// the rate rounded up, when it is 0: a second's worth of calls at once.
func CheckLimit(rate float64, burst int) (float64, int, error) {
	switch {
	case math.IsNaN(rate) || rate < 0 || rate > MaxRate || burst < 0 || burst > MaxBurst:
		return 0, 0, ErrLimit
	case rate == 0 && burst != 0:
		return 0, 0, ErrLimit
	case rate > 0 && burst == 0:
		burst = int(math.Ceil(rate))
	}
	return rate, burst, nil
}
