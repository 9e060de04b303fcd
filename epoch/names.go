package epoch

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig: a name, constant or option was refused. The error is a
// *ConfigError naming the field.
var ErrInvalidConfig = errors.New("epoch: invalid configuration")

// ConfigError names the field that was refused and why.
type ConfigError struct {
	Field  string
	Value  any
	Reason string
	// Err is the cause, when there is one (an objstore.ErrInvalidKey, say):
	// errors.Is reaches it through the ConfigError.
	Err error
}

func (e *ConfigError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("epoch: invalid %s %v: %s: %v", e.Field, e.Value, e.Reason, e.Err)
	}
	return fmt.Sprintf("epoch: invalid %s %v: %s", e.Field, e.Value, e.Reason)
}

// Unwrap makes errors.Is match ErrInvalidConfig and the cause.
func (e *ConfigError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidConfig}
	}
	return []error{ErrInvalidConfig, e.Err}
}

// MaxNameLen bounds star ids, class names and bucket names.
const MaxNameLen = 64

// ValidateName checks an identifier used in object keys and metastore keys
// (star ids, classes, bucket names, key prefixes): 1 to MaxNameLen bytes of
// [A-Za-z0-9._-], not starting with '.' or '-'. Such a name can never form a
// path segment like ".." and never contains '/'. field labels the error.
func ValidateName(field, name string) error {
	if name == "" {
		return &ConfigError{Field: field, Value: fmt.Sprintf("%q", name), Reason: "empty"}
	}
	if len(name) > MaxNameLen {
		return &ConfigError{Field: field, Value: fmt.Sprintf("%.20q…", name), Reason: fmt.Sprintf("longer than %d bytes", MaxNameLen)}
	}
	if name[0] == '.' || name[0] == '-' {
		return &ConfigError{Field: field, Value: fmt.Sprintf("%q", name), Reason: "starts with '.' or '-'"}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return &ConfigError{Field: field, Value: fmt.Sprintf("%q", name), Reason: fmt.Sprintf("byte %#x at %d is not one of [A-Za-z0-9._-]", c, i)}
		}
	}
	return nil
}
