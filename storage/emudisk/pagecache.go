package emudisk

import (
	"path/filepath"
	"strings"
	"sync"
)

// pageCache models the OS page cache a node of its own would have: which pages of which files a
// kernel with Options.PageCacheBytes of cache would hold, least recently used evicted first. Pages
// enter when they are read (or fetched by a readahead) and when they are written (a kernel caches
// what it writes back); a read of pages it holds costs the device nothing. The bypass keeps the
// real page cache to the same pages: what the model holds is not dropped, and a page it evicts is
// dropped from the real cache when the file is open (a closed file's evicted pages stay until the
// kernel drops them; the model charges them as misses all the same). Pages of a removed file leave
// with it. It is used under Device, one per device.
type pageCache struct {
	mu    sync.Mutex
	cap   int // pages
	n     int
	files map[string]*pcFile
	lru   pcPage // sentinel: lru.next is the most recently used page, lru.prev the least
}

// pcFile is one file's resident pages and its open handles (to drop an evicted page for real).
type pcFile struct {
	name  string
	pages map[int64]*pcPage
	open  map[*file]struct{}
}

type pcPage struct {
	f          *pcFile
	idx        int64
	prev, next *pcPage
}

// evicted is a page the model dropped, to be dropped from the real page cache through fd.
type evicted struct {
	f   *file
	idx int64
}

func newPageCache(bytes int64) *pageCache {
	c := &pageCache{cap: int(max(1, bytes/int64(pageSize))), files: map[string]*pcFile{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// opened registers f as an open handle of name and returns the file's model.
func (c *pageCache) opened(name string, f *file) *pcFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	pf := c.files[name]
	if pf == nil {
		pf = &pcFile{name: name, pages: map[int64]*pcPage{}, open: map[*file]struct{}{}}
		c.files[name] = pf
	}
	pf.open[f] = struct{}{}
	return pf
}

// closed unregisters an open handle.
func (c *pageCache) closed(pf *pcFile, f *file) {
	c.mu.Lock()
	delete(pf.open, f)
	c.mu.Unlock()
}

// access touches the pages of [off, off+n) of pf and reports whether all of them were resident.
// The missing pages enter (most recently used) and the model evicts down to its capacity; the
// pages evicted are returned, to be dropped from the real page cache.
func (c *pageCache) access(pf *pcFile, off, n int64) (hit bool, out []evicted) {
	if n <= 0 {
		return true, nil
	}
	first, last := off/int64(pageSize), (off+n-1)/int64(pageSize)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files[pf.name] != pf {
		// The file was removed or renamed over while open: its pages are not cached by name any
		// more; model them as uncached.
		return false, nil
	}
	hit = true
	for i := first; i <= last; i++ {
		p := pf.pages[i]
		if p == nil {
			hit = false
			p = &pcPage{f: pf, idx: i}
			pf.pages[i] = p
			c.n++
		} else {
			c.unlink(p)
		}
		c.pushFront(p)
	}
	for c.n > c.cap {
		p := c.lru.prev
		c.unlink(p)
		delete(p.f.pages, p.idx)
		c.n--
		for h := range p.f.open {
			out = append(out, evicted{f: h, idx: p.idx})
			break // one handle drops the page for every handle of the file
		}
	}
	return hit, out
}

// remove forgets name's pages (the file was deleted).
func (c *pageCache) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(name)
}

func (c *pageCache) removeLocked(name string) {
	pf := c.files[name]
	if pf == nil {
		return
	}
	for _, p := range pf.pages {
		c.unlink(p)
		c.n--
	}
	clear(pf.pages)
	delete(c.files, name)
}

// removeTree forgets the pages of dir and of every file under it (RemoveAll).
func (c *pageCache) removeTree(dir string) {
	prefix := strings.TrimSuffix(dir, string(filepath.Separator)) + string(filepath.Separator)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(dir)
	for name := range c.files {
		if strings.HasPrefix(name, prefix) {
			c.removeLocked(name)
		}
	}
}

// rename moves oldname's pages to newname, replacing whatever newname held.
func (c *pageCache) rename(oldname, newname string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if oldname == newname {
		return
	}
	c.removeLocked(newname)
	if pf := c.files[oldname]; pf != nil {
		delete(c.files, oldname)
		pf.name = newname
		c.files[newname] = pf
	}
}

// resident is the number of pages the model holds.
func (c *pageCache) resident() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *pageCache) unlink(p *pcPage) {
	p.prev.next, p.next.prev = p.next, p.prev
	p.prev, p.next = nil, nil
}

func (c *pageCache) pushFront(p *pcPage) {
	p.prev, p.next = &c.lru, c.lru.next
	c.lru.next.prev = p
	c.lru.next = p
}
