package auth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// User is one set of credentials and what it may do.
type User struct {
	AccessKey string
	secretKey []byte
	// Admin may do everything, including the admin API (topics, groups).
	Admin bool
	// Disabled users are refused (a suspension that keeps the entry).
	Disabled bool
	// Publish, Subscribe and Groups list the topics a user may send to,
	// the topics it may consume and the consumer groups it may consume
	// as. nil allows every name; an empty list allows none. A pattern is
	// a name, or a prefix ending in '*'.
	Publish, Subscribe, Groups []string
}

// MayPublish reports whether u may publish to some topic: an admin, or a
// publish list that is absent or not empty.
func (u *User) MayPublish() bool { return u.Admin || u.Publish == nil || len(u.Publish) > 0 }

// NoPublishRight is the refusal of a send from u, who may publish to no
// topic (!u.MayPublish()).
func NoPublishRight(u *User) error {
	return unauthorized("access key %q may not publish to any topic", u.AccessKey)
}

// Users is an immutable set of users keyed by access key.
type Users struct {
	byKey map[string]*User
}

// Len is the number of users.
func (u *Users) Len() int { return len(u.byKey) }

type fileUser struct {
	AccessKey string    `yaml:"accessKey"`
	SecretKey string    `yaml:"secretKey"`
	Admin     bool      `yaml:"admin"`
	Disabled  bool      `yaml:"disabled"`
	Publish   *[]string `yaml:"publish"`
	Subscribe *[]string `yaml:"subscribe"`
	Groups    *[]string `yaml:"groups"`
}

type file struct {
	Users []fileUser `yaml:"users"`
}

// Load reads a users file (see Parse).
func Load(path string) (*Users, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	u, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return u, nil
}

// Parse decodes a users file:
//
//	users:
//	  - accessKey: orders-app
//	    secretKey: "a long random string"
//	    publish: ["orders", "audit-*"]   # absent: every topic; []: none
//	    subscribe: ["orders"]
//	    groups: ["billing"]
//	  - accessKey: ops
//	    secretKey: "..."
//	    admin: true                      # everything, and the admin API
//	  - accessKey: old-app
//	    secretKey: "..."
//	    disabled: true                   # refused, entry kept
//
// Unknown keys, duplicate or malformed access keys, empty secrets and
// malformed patterns are errors; a file with no users is one too (it would
// lock everybody out).
func Parse(b []byte) (*Users, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if len(f.Users) == 0 {
		return nil, errors.New("no users: with auth enabled nobody could connect")
	}
	us := &Users{byKey: make(map[string]*User, len(f.Users))}
	var errs []error
	for i, fu := range f.Users {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("user %d (%q): "+format, append([]any{i + 1, fu.AccessKey}, args...)...))
		}
		if err := checkAccessKey(fu.AccessKey); err != nil {
			bad("%v", err)
			continue
		}
		if fu.SecretKey == "" {
			bad("secretKey is empty")
		}
		if _, dup := us.byKey[fu.AccessKey]; dup {
			bad("access key appears twice")
			continue
		}
		u := &User{AccessKey: fu.AccessKey, secretKey: []byte(fu.SecretKey), Admin: fu.Admin, Disabled: fu.Disabled}
		for _, l := range []struct {
			name string
			in   *[]string
			out  *[]string
		}{{"publish", fu.Publish, &u.Publish}, {"subscribe", fu.Subscribe, &u.Subscribe}, {"groups", fu.Groups, &u.Groups}} {
			if l.in == nil {
				continue
			}
			*l.out = make([]string, 0, len(*l.in))
			for _, p := range *l.in {
				if err := checkPattern(p); err != nil {
					bad("%s: %v", l.name, err)
				}
				*l.out = append(*l.out, p)
			}
		}
		us.byKey[u.AccessKey] = u
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return us, nil
}

// checkAccessKey refuses what the authorization header's grammar cannot
// carry (comma-separated key=value pairs, '/' ends the key).
func checkAccessKey(k string) error {
	if k == "" {
		return errors.New("accessKey is empty")
	}
	if len(k) > 256 {
		return errors.New("accessKey is longer than 256 bytes")
	}
	if strings.ContainsAny(k, "/,= \t\r\n") {
		return errors.New("accessKey must not contain '/', ',', '=' or white space")
	}
	return nil
}

func checkPattern(p string) error {
	if p == "" {
		return errors.New("empty pattern")
	}
	if i := strings.IndexByte(p, '*'); i >= 0 && i != len(p)-1 {
		return fmt.Errorf("pattern %q: '*' may only end a pattern", p)
	}
	return nil
}

func (u *Users) get(accessKey string) *User { return u.byKey[accessKey] }

// matches reports whether name is allowed by patterns (nil: everything).
func matches(patterns []string, name string) bool {
	if patterns == nil {
		return true
	}
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}
