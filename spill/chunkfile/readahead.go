package chunkfile

import "sync"

// readAhead is one goroutine that decodes chunks in order into two slots: while the caller reads
// one, it fills the other.
type readAhead struct {
	out  chan decoded
	free chan *slot
	quit chan struct{}
	done sync.WaitGroup
}

func startReadAhead(dec *decoder, a, b *slot) *readAhead {
	ra := &readAhead{out: make(chan decoded), free: make(chan *slot, 2), quit: make(chan struct{})}
	ra.free <- a
	ra.free <- b
	ra.done.Add(1)
	go func() {
		defer ra.done.Done()
		for {
			var s *slot
			select {
			case s = <-ra.free:
			case <-ra.quit:
				return
			}
			d := dec.decode(s, nil)
			select {
			case ra.out <- d:
			case <-ra.quit:
				return
			}
			if d.err != nil || d.last {
				return
			}
		}
	}()
	return ra
}

func (ra *readAhead) stop() {
	close(ra.quit)
	ra.done.Wait()
}

func (r *Reader) stopReadAhead() {
	if r.ahead != nil {
		r.ahead.stop()
		r.ahead = nil
	}
}
