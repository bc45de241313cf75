package bench

import (
	"fmt"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// Where a waiting request's memory goes: its heap by allocation site (a
// heap profile taken in the process, every allocation sampled) and its
// stack frame by frame (a goroutine dump with each frame's bounds).

// A HeapSite is heap in use allocated at one place, per request.
type HeapSite struct {
	// Site is the function that allocated, the first outside the runtime,
	// with its file and line; "goroutine" for the goroutines themselves.
	Site string
	// Via is the chain of callers that led there, innermost first, up to
	// the scenario's caller (left out), shortened.
	Via            string
	Bytes, Objects float64 // per request
}

// A HeapProfile is the heap in use by allocation site, read from the
// runtime's memory profile. It covers every allocation only when
// runtime.MemProfileRate was set to 1 before they were made.
type HeapProfile map[[2]string][2]int64 // site, via: bytes, objects

// ReadHeapProfile collects the garbage (which publishes the profile) and
// reads the heap in use by allocation site.
func ReadHeapProfile() HeapProfile {
	runtime.GC()
	var recs []runtime.MemProfileRecord
	for {
		n, _ := runtime.MemProfile(nil, false)
		recs = make([]runtime.MemProfileRecord, n+50)
		if n, ok := runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	p := HeapProfile{}
	for i := range recs {
		r := &recs[i]
		if r.InUseBytes() <= 0 {
			continue
		}
		k := siteOf(r.Stack())
		v := p[k]
		v[0] += r.InUseBytes()
		v[1] += r.InUseObjects()
		p[k] = v
	}
	return p
}

// siteOf names the allocation site of a stack and the callers that led
// there.
func siteOf(stk []uintptr) [2]string {
	frames := runtime.CallersFrames(stk)
	var (
		site string
		via  []string
	)
	for {
		f, more := frames.Next()
		fn := f.Function
		switch {
		case fn == "runtime.newproc1" || fn == "runtime.malg":
			if site == "" {
				site = "goroutine (its g)"
			}
		case site == "" && (strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/")):
		case site == "":
			site = fmt.Sprintf("%s (%s:%d)", shortFunc(fn), path.Base(f.File), f.Line)
		case strings.Contains(fn, "bench.Waiting.Run"), strings.HasPrefix(fn, "sync.(*WaitGroup)"):
			more = false
		case !strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "internal/"):
			if len(via) < 5 {
				via = append(via, shortFunc(fn))
			}
		}
		if !more {
			break
		}
	}
	return [2]string{site, strings.Join(via, " ← ")}
}

// shortFunc shortens a function's module path: "retryhttp.(*call).run",
// "retryhttp/internal/clock.Real.Sleep", "bench.handLoop.RoundTrip",
// "go-retryablehttp.(*Client).Do".
func shortFunc(fn string) string {
	for _, p := range [][2]string{
		{"github.com/retryhttp/retryhttp/bench.", "bench."},
		{"github.com/retryhttp/retryhttp/", "retryhttp/"},
		{"github.com/retryhttp/retryhttp.", "retryhttp."},
		{"github.com/hashicorp/", ""},
		{"github.com/failsafe-go/", ""},
		{"github.com/PuerkitoBio/", ""},
	} {
		if rest, ok := strings.CutPrefix(fn, p[0]); ok {
			return p[1] + rest
		}
	}
	return fn
}

// Whose a heap site is, for HeapShares.
const (
	ShareGoroutine = "goroutine"           // the goroutine itself (its g)
	ShareCaller    = "request and context" // made by the caller before the library saw the request
	ShareClient    = "http.Client's"       // made by the caller's http.Client, around the library
	ShareResponse  = "503 response kept"   // the failed attempt's response, from the base, still referenced
	ShareLibrary   = "the library's own"   // everything else: the library's state and its wait
)

// libraryFrames are the prefixes of the measured libraries' functions (as
// shortFunc gives them).
var libraryFrames = []string{"retryhttp.", "retryhttp/", "go-retryablehttp.", "failsafe-go", "rehttp.", "bench.handLoop", "bench.(*handLoop)"}

// Share says whose s is: the goroutine's, the caller's request and
// context, the base's failed response that the library still references,
// or the library's own.
func (s HeapSite) Share() string {
	all := s.Site + " ← " + s.Via
	switch {
	case strings.HasPrefix(s.Site, "goroutine"):
		return ShareGoroutine
	case strings.Contains(all, "outageBase"):
		return ShareResponse
	case strings.Contains(all, "context.WithTimeout"),
		strings.Contains(all, "NewRequestWithContext") && !strings.Contains(s.Via, ".RoundTrip") && !strings.Contains(s.Via, ".Do"):
		return ShareCaller
	case strings.Contains(all, "net/http.(*Client)") && !slices.ContainsFunc(strings.Split(all, " ← "), func(f string) bool {
		return slices.ContainsFunc(libraryFrames, func(p string) bool { return strings.HasPrefix(f, p) })
	}):
		return ShareClient
	}
	return ShareLibrary
}

// Shares lists the shares of HeapShares, in its order.
var Shares = []string{ShareGoroutine, ShareCaller, ShareClient, ShareResponse, ShareLibrary}

// HeapShares sums sites by Share, in bytes per request, in the order of
// Shares.
func HeapShares(sites []HeapSite) []float64 {
	out := make([]float64, len(Shares))
	for _, s := range sites {
		out[slices.Index(Shares, s.Share())] += s.Bytes
	}
	return out
}

// Sites returns what p holds over base, per request of requests, the
// largest first; sites under min bytes per request are summed into one,
// "other".
func (p HeapProfile) Sites(base HeapProfile, requests int, min float64) []HeapSite {
	var out []HeapSite
	var other HeapSite
	for k, v := range p {
		b := base[k]
		s := HeapSite{Site: k[0], Via: k[1], Bytes: float64(v[0]-b[0]) / float64(requests), Objects: float64(v[1]-b[1]) / float64(requests)}
		if s.Bytes < min {
			other.Bytes += s.Bytes
			other.Objects += s.Objects
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b HeapSite) int {
		if a.Bytes != b.Bytes {
			if a.Bytes > b.Bytes {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Site+a.Via, b.Site+b.Via)
	})
	if other.Bytes != 0 {
		other.Site = fmt.Sprintf("other (each under %.0f B)", min)
		out = append(out, other)
	}
	return out
}

// A StackFrame is one frame of a goroutine's stack.
type StackFrame struct {
	Func    string // shortened (shortFunc)
	Where   string // file:line
	Bytes   int    // its frame, return address included; 0 if inlined
	Inlined bool   // inlined in the frame after it
}

// ParseWaitingStack finds, in a goroutine dump written with
// GOTRACEBACK=system (every frame with its fp and sp), the first goroutine
// blocked whose stack holds the function marker, and returns its frames,
// innermost first.
func ParseWaitingStack(dump, marker string) ([]StackFrame, error) {
	for _, block := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "goroutine ") || strings.Contains(lines[0], "[running]") ||
			!strings.Contains(block, marker) {
			continue
		}
		var frames []StackFrame
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "created by ") {
				break
			}
			if !strings.HasPrefix(l, "\t") {
				i := strings.LastIndex(l, "(")
				if i < 0 {
					return nil, fmt.Errorf("a frame without arguments: %q", l)
				}
				frames = append(frames, StackFrame{Func: shortFunc(l[:i]), Inlined: strings.HasSuffix(l, "(...)")})
				continue
			}
			if len(frames) == 0 {
				return nil, fmt.Errorf("a location before any frame: %q", l)
			}
			f := &frames[len(frames)-1]
			fields := strings.Fields(l)
			f.Where = path.Base(fields[0])
			var fp, sp uint64
			for _, fl := range fields[1:] {
				if v, ok := strings.CutPrefix(fl, "fp=0x"); ok {
					fp, _ = strconv.ParseUint(v, 16, 64)
				} else if v, ok := strings.CutPrefix(fl, "sp=0x"); ok {
					sp, _ = strconv.ParseUint(v, 16, 64)
				}
			}
			if !f.Inlined {
				if fp == 0 || sp == 0 || fp < sp {
					return nil, fmt.Errorf("no frame bounds (GOTRACEBACK=system?) in %q", l)
				}
				f.Bytes = int(fp - sp)
			}
		}
		return frames, nil
	}
	return nil, fmt.Errorf("no goroutine blocked in %s in the dump", marker)
}

// StackDepth is the bytes of a goroutine's stack in use: the sum of its
// frames.
func StackDepth(frames []StackFrame) int {
	n := 0
	for _, f := range frames {
		n += f.Bytes
	}
	return n
}
