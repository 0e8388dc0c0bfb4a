package memory

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What the reconciler remembers of the entries' identities (package
// reconcile, identity.go): which ServiceAccounts were found to exist, and
// which writes the API server refused an identity. Both are kept for a
// while, not per resource: they answer alike for every resource of a
// tenant, which is what lets a thousand resources cost one request.

// AccountTTL is how long an identity's ServiceAccount, once read, is taken
// to exist without being read again: a converged resync of many resources
// of one tenant costs one GET per account and TTL, not one per resource.
// An account deleted meanwhile is reported IdentityNotFound at the first
// sync after the TTL; until then its writes are checked against whatever
// RBAC still names its user.
const AccountTTL = 30 * time.Second

// memoBound is how many entries a time-bounded memo holds before it drops
// the expired ones.
const memoBound = 1024

// Accounts remembers the ServiceAccounts found to exist, by user, for
// AccountTTL. An account found missing is not remembered: it is read again
// at the next sync.
type Accounts struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// Fresh reports whether user's account was read within AccountTTL.
func (a *Accounts) Fresh(user string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.seen[user]
	return ok && now.Sub(t) < AccountTTL
}

// Saw records that user's account exists, dropping what expired once the
// memo grows (bounded by the accounts read within a TTL).
func (a *Accounts) Saw(user string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil {
		a.seen = map[string]time.Time{}
	}
	if len(a.seen) >= memoBound {
		for u, t := range a.seen {
			if now.Sub(t) >= AccountTTL {
				delete(a.seen, u)
			}
		}
	}
	a.seen[user] = now
}

// WriteKey is one kind of write as one user: what RBAC answers alike for
// every object of the resource in the namespace.
type WriteKey struct {
	User, Verb string
	Resource   schema.GroupResource
	Namespace  string
}

// Refused is what the API server answered a refused write, and until when
// the answer stands.
type Refused struct {
	Err   error
	Until time.Time
}

// IdentityRefusals remembers the writes the API server refused an
// identity, until each one's recheck: a write of the same kind, as the same
// user, in the same namespace, fails from memory without a request until
// then. A thousand resources of a tenant whose account may not create
// Services cost one refused request per recheck, not a thousand.
type IdentityRefusals struct {
	mu sync.Mutex
	by map[WriteKey]Refused
}

// Get returns the refusal of k still standing at now.
func (r *IdentityRefusals) Get(k WriteKey, now time.Time) (Refused, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.by[k]
	return f, ok && now.Before(f.Until)
}

// Set remembers f for k, dropping what expired once the memo grows.
func (r *IdentityRefusals) Set(k WriteKey, f Refused) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[WriteKey]Refused{}
	}
	if len(r.by) >= memoBound {
		now := time.Now()
		for key, old := range r.by {
			if !now.Before(old.Until) {
				delete(r.by, key)
			}
		}
	}
	r.by[k] = f
}
