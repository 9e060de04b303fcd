package objstore

import (
	"fmt"
	"log/slog"

	"github.com/cutline/cutline"
	"github.com/cutline/cutline/clock"
)

// MaxRetries bounds RemoteOptions.Retries: no backend retries one Create
// more often than this.
const MaxRetries = 100

// RemoteOptions are the optional settings every Bucket over a remote
// store takes (objstore/s3, objstore/gcs, objstore/azblob). The zero value
// works: the backend fills each zero field with its own default
// (WithDefaults) after refusing nonsense (Validate). What a retry of
// Create answers, and the defaults of Retries and Backoff, are each
// backend's own; its Options say them.
type RemoteOptions struct {
	// Name identifies the bucket in logs and errors (a zone name such as
	// "zone-a"). Default: the store's own name of the bucket or
	// container.
	Name string
	// Logger receives debug and warning records. Default: discard.
	Logger *slog.Logger
	// Clock times the backoff between Create's retries. Default: the wall
	// clock.
	Clock clock.Clock
	// Retries bounds how often one Create retries, at most MaxRetries. 0
	// means the backend's DefaultRetries.
	Retries int
	// Backoff spaces those retries, jittered so that racing creators
	// spread out. Zero fields mean the backend's defaults.
	Backoff clock.Backoff
}

// Validate refuses Retries outside [0, MaxRetries] and an invalid Backoff
// with a *cutline.ConfigError naming the field.
func (o RemoteOptions) Validate() error {
	if o.Retries < 0 || o.Retries > MaxRetries {
		return &cutline.ConfigError{Field: "Retries", Value: o.Retries,
			Reason: fmt.Sprintf("must satisfy 0 ≤ Retries ≤ %d", MaxRetries)}
	}
	return o.Backoff.Validate("Backoff")
}

// WithDefaults returns o with each zero field taken from def, a backend's
// defaults (Backoff field by field, see clock.Backoff.Or). A Logger or
// Clock that is nil in both is then a discarding logger and the wall
// clock, so that the result has every field set.
func (o RemoteOptions) WithDefaults(def RemoteOptions) RemoteOptions {
	if o.Name == "" {
		o.Name = def.Name
	}
	if o.Logger == nil {
		o.Logger = def.Logger
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Or(def.Clock)
	}
	if o.Retries == 0 {
		o.Retries = def.Retries
	}
	o.Backoff = o.Backoff.Or(def.Backoff)
	return o
}

// RemoteStore is what a remote backend tells NewRemote about its store.
type RemoteStore struct {
	// Kind names the backend in log records ("s3", "gcs", "azblob").
	Kind string
	// NameField is the store's word for a bucket, the field named when New
	// refuses one: "bucket", "container".
	NameField string
	// ValidName tells whether the store could hold a bucket of this
	// (non-empty) name; NameRule says why not when it cannot. The check
	// runs before anything is sent, so that a name cannot reach another
	// path of the store.
	ValidName func(name string) bool
	NameRule  string
	// Defaults are the store's defaults of Retries and Backoff. Their Name
	// is not used: a bucket is named by its store name by default.
	Defaults RemoteOptions
	// Classify is the backend's table of error codes (Remote.Classify).
	Classify func(err error) error
}

// NewRemote is the check a remote backend's New makes of what it was
// given, and the Remote it then keeps. It refuses a nil client, an empty
// name and one that s.ValidName refuses, and options that Validate
// refuses, each with a *cutline.ConfigError naming the field; otherwise
// the Remote has opts with each zero field filled from s.Defaults, and
// Name from name, the bucket's name in the store.
func NewRemote[C any](client *C, name string, opts RemoteOptions, s RemoteStore) (Remote, error) {
	switch {
	case client == nil:
		return Remote{}, &cutline.ConfigError{Field: "client", Reason: "nil"}
	case name == "":
		return Remote{}, &cutline.ConfigError{Field: s.NameField, Reason: "empty"}
	case !s.ValidName(name):
		return Remote{}, &cutline.ConfigError{Field: s.NameField, Value: fmt.Sprintf("%q", name), Reason: s.NameRule}
	}
	if err := opts.Validate(); err != nil {
		return Remote{}, err
	}
	def := s.Defaults
	def.Name = name
	return Remote{RemoteOptions: opts.WithDefaults(def), Kind: s.Kind, Classify: s.Classify}, nil
}
