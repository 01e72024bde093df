package plan

import (
	"sync"
	"sync/atomic"

	"github.com/spillway/spillway/spill"
)

// A caller that cannot keep a Go value between plans nor register its dirs (NativeSpill.createPlan
// with a String[]) still passes the same dirs to every plan. CreatePlanForDirs recognises them by
// their content: the caller gives an exact encoding of the dirs as it read them (a key), and a key
// seen before reuses the dirs parsed then, without converting or validating a path again.
//
// This is the one recognition of a dir list, shared by both bindings (the JNI binding's createPlan
// and the C ABI's spillway_plan_create): without it each call would convert and validate its
// paths again.
//
// Why nothing can poison it: an entry is stored only after the paths decoded from that very key
// were validated, and a lookup compares every byte of the key, so an entry holds exactly what its
// key says. A caller that changes its dirs (another String in its array, the same chars or not)
// reads a different content, hence a different key, or the same content, which means the same
// dirs. Nothing is keyed by a reference or an address that could later name something else.

// Bounds on the dir sets remembered: enough for every executor (one set, or a few), small enough
// that what a caller can make the registry keep is bounded (64 sets of at most 64 KiB of key). A
// longer key is never stored: such a list is converted on every call, as without the cache.
const (
	maxCachedDirSets   = 64
	maxCachedDirKeyLen = 64 << 10
)

// dirSetCache maps keys to parsed dirs. Lookups load one pointer and read an immutable map, so
// plans never meet on a lock; a miss that stores a set copies the map under mu, which only misses
// take. Past maxCachedDirSets sets it starts again from the new set alone, so a process whose dirs
// changed keeps hitting on the ones it uses now.
type dirSetCache struct {
	sets atomic.Pointer[map[string]*spill.Roots]
	mu   sync.Mutex
}

func (c *dirSetCache) get(key []byte) *spill.Roots {
	if m := c.sets.Load(); m != nil {
		return (*m)[string(key)] // compiled without a copy of key
	}
	return nil
}

func (c *dirSetCache) put(key []byte, roots *spill.Roots) {
	if len(key) > maxCachedDirKeyLen {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var next map[string]*spill.Roots
	if old := c.sets.Load(); old != nil && len(*old) < maxCachedDirSets {
		if _, ok := (*old)[string(key)]; ok {
			return // a racing miss stored the same dirs
		}
		next = make(map[string]*spill.Roots, len(*old)+1)
		for k, v := range *old {
			next[k] = v
		}
	} else {
		next = make(map[string]*spill.Roots, 1)
	}
	next[string(key)] = roots
	c.sets.Store(&next)
}

func (c *dirSetCache) len() int {
	if m := c.sets.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// CreatePlanForDirs is CreatePlan in the dirs that paths returns, for a caller that holds its dirs
// only in a form of its own (a Java String[]). key is an exact encoding of that form: two calls
// with equal keys must have paths return equal lists (paths being a function of the key alone, and
// key determining the list, count and boundaries included). A key seen in an earlier successful
// call reuses the dirs validated then, and paths is not called; otherwise paths is called, the
// list validated as ParseLocalDirs does (errors included, none remembered) and, if valid,
// remembered under key. Either way the plan is exactly the one CreatePlan makes: lazy, with its
// own limits, touching no filesystem. A hit takes no lock and allocates only the plan.
//
// A remembered set is never released: plans created in it hold it for their own lives, as plans
// created through a registration do (ReleaseLocalDirs).
func (r *Registry) CreatePlanForDirs(key []byte, paths func() ([]string, error), limit, executorLimit int64) (uint64, error) {
	roots := r.dirSets.get(key)
	if roots == nil {
		list, err := paths()
		if err != nil {
			return 0, err
		}
		if roots, err = spill.NewRoots(list); err != nil {
			return 0, err
		}
		r.dirSets.put(key, roots)
	}
	return r.CreatePlan(LocalDirs{roots: roots}, limit, executorLimit)
}

// CachedDirSets counts the dir sets CreatePlanForDirs remembers (at most 64), for tests.
func (r *Registry) CachedDirSets() int { return r.dirSets.len() }

// PlanDirs are the local dirs of plan h, cleaned, in the order given.
func (r *Registry) PlanDirs(h uint64) ([]string, error) {
	p, ok := r.plans.get(h)
	if !ok {
		return nil, &HandleError{What: "plan", Handle: h}
	}
	roots := p.spill.Roots()
	out := make([]string, roots.Len())
	for i := range out {
		out[i] = roots.Path(i)
	}
	return out, nil
}
