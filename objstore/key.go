package objstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key any backend accepts, in bytes (S3's limit).
const MaxKeyLen = 1024

// KeyError says why a key was refused. It matches ErrInvalidKey.
type KeyError struct {
	Key    string
	Reason string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("objstore: invalid key %q: %s", truncate(e.Key), e.Reason)
}

func (e *KeyError) Unwrap() error { return ErrInvalidKey }

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// ValidateKey checks a key against the rules every backend enforces: 1 to
// MaxKeyLen bytes of valid UTF-8, no control characters or backslashes, no
// leading or trailing '/', and no empty, "." or ".." path segments. A key that
// passes cannot name anything outside the bucket (or the fs backend's root).
func ValidateKey(key string) error {
	switch {
	case key == "":
		return &KeyError{Key: key, Reason: "empty"}
	case len(key) > MaxKeyLen:
		return &KeyError{Key: key, Reason: fmt.Sprintf("longer than %d bytes", MaxKeyLen)}
	case !utf8.ValidString(key):
		return &KeyError{Key: key, Reason: "not valid UTF-8"}
	case strings.HasPrefix(key, "/"):
		return &KeyError{Key: key, Reason: "leading '/'"}
	case strings.HasSuffix(key, "/"):
		return &KeyError{Key: key, Reason: "trailing '/'"}
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return &KeyError{Key: key, Reason: fmt.Sprintf("control character %U", r)}
		}
		if r == '\\' {
			return &KeyError{Key: key, Reason: "backslash"}
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return &KeyError{Key: key, Reason: "empty path segment"}
		case ".", "..":
			return &KeyError{Key: key, Reason: fmt.Sprintf("%q path segment", seg)}
		}
	}
	return nil
}

// ValidatePrefix checks a List prefix: empty, or a string that would be a
// valid key once completed (it may end in '/').
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		return &KeyError{Key: prefix, Reason: "prefix is only '/'"}
	}
	if err := ValidateKey(p); err != nil {
		return &KeyError{Key: prefix, Reason: err.(*KeyError).Reason}
	}
	return nil
}
