package epoch

import (
	"fmt"

	"github.com/cutline/cutline"
)

// MaxNameLen bounds star ids, class names and bucket names.
const MaxNameLen = 64

// ValidateName checks an identifier used in object keys and metastore keys
// (star ids, classes, bucket names, key prefixes): 1 to MaxNameLen bytes of
// [A-Za-z0-9._-], not starting with '.' or '-'. Such a name can never form a
// path segment like ".." and never contains '/'. field labels the error.
func ValidateName(field, name string) error {
	if name == "" {
		return &cutline.ConfigError{Field: field, Value: fmt.Sprintf("%q", name), Reason: "empty"}
	}
	if len(name) > MaxNameLen {
		return &cutline.ConfigError{Field: field, Value: fmt.Sprintf("%.20q…", name), Reason: fmt.Sprintf("longer than %d bytes", MaxNameLen)}
	}
	if name[0] == '.' || name[0] == '-' {
		return &cutline.ConfigError{Field: field, Value: fmt.Sprintf("%q", name), Reason: "starts with '.' or '-'"}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return &cutline.ConfigError{Field: field, Value: fmt.Sprintf("%q", name), Reason: fmt.Sprintf("byte %#x at %d is not one of [A-Za-z0-9._-]", c, i)}
		}
	}
	return nil
}
