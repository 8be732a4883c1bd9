//go:build darwin

package metal

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ebitengine/purego/objc"
)

// archive is a device's pipeline cache (cache.go): an MTLBinaryArchive
// (macOS 11+). Loaded from the cache directory, the pipelines Open builds
// take their GPU code from it instead of compiling it; on a miss Open
// builds the pipelines as without a cache, then adds every kernel to a new
// archive and stores it for the next start. The library itself is still
// compiled from source at every start (Metal cannot serialize a library
// compiled from source; the system's own shader cache may make that fast).
type archive struct {
	id       objc.ID // owned MTLBinaryArchive; 0: no cache
	dir, key string
	loaded   bool // read from dir: pipelines look their code up in it
}

// osBuild returns the macOS build ("24A335"), or "" if unknown: a new build
// may compile differently, so it is part of the key.
func osBuild() string {
	v, err := syscall.Sysctl("kern.osversion")
	if err != nil {
		return ""
	}
	return v
}

// cacheSupported reports whether this Metal has what the cache needs.
func (d *device) cacheSupported() bool {
	return classNSURL != 0 && classNSArray != 0 && classMTLBinaryArchiveDescriptor != 0 &&
		classMTLComputePipelineDescriptor != 0 &&
		msgRespond(d.id, selRespondsToSelector, selNewBinaryArchiveWithDescriptor) &&
		msgRespond(d.id, selRespondsToSelector, selNewPipelineWithDescriptorOptions)
}

// fileURL returns an autoreleased NSURL for path. Call it inside withPool.
func fileURL(path string) objc.ID {
	str := newNSString(path)
	if str == 0 {
		return 0
	}
	defer release(str)
	return msgIDID(classNSURL, selFileURLWithPath, str)
}

// openArchive sets d.arch up for a library compiled from source with
// settings: the cached archive when a valid one exists, else an empty one to
// fill. Cache trouble is logged and never fails Open. It runs inside an
// autorelease pool.
func (d *device) openArchive(source, settings string) {
	dir := cacheDir()
	if dir == "" || !d.cacheSupported() {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		slog.Debug("metal: no pipeline cache", "err", err)
		return
	}
	key := cacheKey(source, osBuild(), d.info.Name, settings)
	path, err := cachedArchive(dir, key)
	if err != nil && !errors.Is(err, errNoEntry) {
		slog.Warn("metal: pipeline cache", "err", err)
	}
	desc := msgID(msgID(classMTLBinaryArchiveDescriptor, selAlloc), selInit) // owned
	if desc == 0 {
		return
	}
	defer release(desc)
	var id objc.ID
	loaded := false
	if path != "" {
		msgSetID(desc, selSetURL, fileURL(path))
		var nserr objc.ID
		id = msgNewPipeline(d.id, selNewBinaryArchiveWithDescriptor, desc, &nserr) // owned
		loaded = id != 0
		if id == 0 {
			slog.Warn("metal: pipeline cache entry refused by Metal (removed, it will be rebuilt)", "path", path, "err", nsErrorText(nserr))
			removeEntry(dir, key)
			msgSetID(desc, selSetURL, 0)
		}
	}
	if id == 0 {
		var nserr objc.ID
		if id = msgNewPipeline(d.id, selNewBinaryArchiveWithDescriptor, desc, &nserr); id == 0 { // an empty archive
			slog.Debug("metal: no pipeline cache", "err", nsErrorText(nserr))
			return
		}
	}
	d.arch = archive{id: id, dir: dir, key: key, loaded: loaded}
	slog.Debug("metal pipeline cache", "dir", dir, "key", key, "hit", d.arch.loaded)
}

// pipelineFromArchive builds fn's pipeline from the loaded archive: Metal
// takes the GPU code from it when it holds fn, and compiles fn otherwise.
// It runs inside an autorelease pool.
func (d *device) pipelineFromArchive(fn objc.ID, nserr *objc.ID) objc.ID {
	desc := msgID(msgID(classMTLComputePipelineDescriptor, selAlloc), selInit) // owned
	if desc == 0 {
		return 0
	}
	defer release(desc)
	msgSetID(desc, selSetComputeFunction, fn)
	msgSetID(desc, selSetBinaryArchives, msgIDID(classNSArray, selArrayWithObject, d.arch.id))
	return msgNewPipelineDesc(d.id, selNewPipelineWithDescriptorOptions, desc, 0, 0, nserr) // owned
}

// fillArchive adds the kernels names to a new archive and stores it in the
// cache. Failures are logged: the next start tries again.
func (d *device) fillArchive(names []string) {
	if d.arch.id == 0 || d.arch.loaded {
		return
	}
	start := time.Now()
	ok := true
	for _, name := range names {
		withPool(func() {
			str := newNSString(name)
			if str == 0 {
				return
			}
			defer release(str)
			fn := msgIDID(d.lib, selNewFunctionWithName, str) // owned
			if fn == 0 {
				return
			}
			defer release(fn)
			desc := msgID(msgID(classMTLComputePipelineDescriptor, selAlloc), selInit) // owned
			if desc == 0 {
				ok = false
				return
			}
			defer release(desc)
			msgSetID(desc, selSetComputeFunction, fn)
			var nserr objc.ID
			if !msgBoolIDErr(d.arch.id, selAddComputePipelineFunctions, desc, &nserr) {
				slog.Debug("metal: pipeline cache: kernel not added", "kernel", name, "err", nsErrorText(nserr))
				ok = false
			}
		})
	}
	if !ok {
		return
	}
	f, err := os.CreateTemp(d.arch.dir, "metal-*.archive.tmp")
	if err != nil {
		slog.Debug("metal: pipeline cache not stored", "err", err)
		return
	}
	tmp := f.Name()
	f.Close()
	os.Remove(tmp) // Metal writes the file itself
	var saved bool
	withPool(func() {
		var nserr objc.ID
		saved = msgBoolIDErr(d.arch.id, selSerializeToURL, fileURL(tmp), &nserr)
		if !saved {
			slog.Debug("metal: pipeline cache not stored", "err", nsErrorText(nserr))
		}
	})
	if !saved {
		os.Remove(tmp)
		return
	}
	if err := storeArchive(d.arch.dir, d.arch.key, tmp); err != nil {
		slog.Debug("metal: pipeline cache not stored", "err", err)
		return
	}
	slog.Debug("metal pipeline cache stored", "path", filepath.Join(d.arch.dir, "metal-"+d.arch.key+".archive"),
		"kernels", len(names), "took", time.Since(start))
}
