package model

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/ingot-llm/ingot/kernels"
)

// maxShard is the largest safetensors file QuantizeDir writes (mlx-lm's 5 GB).
const maxShard = 5 << 30

// QuantizeDir writes an mlx-lm compatible copy of the model in src to dst with every
// Linear and Embedding weight quantized to MLX affine codes (bits, group): packed
// U32 codes plus bf16 scales and biases; config.json gains "quantization" and
// "quantization_config"; tokenizer and generation files are copied. dst must not
// exist. progress, if not nil, is called with bytes written and the total.
//
// The copy is written into a temporary directory beside dst, ".<base>.tmp-<digits>",
// and renamed into place at the end, so a run that fails or whose ctx is cancelled
// leaves nothing. A process killed outright (SIGKILL, power loss) cannot clean up,
// so each run first removes the temporary directories of earlier runs for the same
// dst whose writer is gone: a writer holds an flock on a marker file in its
// directory for its whole life, and the kernel drops the lock when the process
// dies. A directory is removed only if its name has that form, it is a real
// directory and it holds an unlocked marker; anything else is left alone. Where
// flock is unavailable (not Linux, macOS or a BSD) nothing is removed.
func QuantizeDir(ctx context.Context, src, dst string, bits, group int, progress func(done, total int64)) error {
	if _, ok := kernels.QuantDType(bits); !ok || (group != 32 && group != 64 && group != 128) {
		return fmt.Errorf("model: quantize: bits %d / group %d not supported (bits 2, 3, 4, 5, 6, 8; groups 32, 64, 128)", bits, group)
	}
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("model: quantize: %s already exists", dst)
	}
	cfg, err := loadConfig(src)
	if err != nil {
		return err
	}
	if q, err := parseQuant(cfg); err != nil || q != nil {
		return fmt.Errorf("model: quantize: %s is already quantized", src)
	}
	files, err := openWeights(src)
	if err != nil {
		return err
	}
	defer files.Close()

	plan, total := quantPlan(files, bits, group)
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dst)), 0o755); err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	removeStaleQuantTemps(dst)
	qt, err := newQuantTemp(dst)
	if err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	defer qt.close()
	tmp := qt.dir

	shards := shardPlan(plan)
	var done int64
	wmap := map[string]string{}
	for i, sh := range shards {
		name := "model.safetensors"
		if len(shards) > 1 {
			name = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		}
		for _, e := range sh {
			wmap[e.name] = name
		}
		err := writeShard(ctx, filepath.Join(tmp, name), sh, func(n int64) {
			done += n
			if progress != nil {
				progress(done, total)
			}
		})
		if err != nil {
			return err
		}
	}
	if len(shards) > 1 {
		idx, _ := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": wmap}, "", "  ")
		if err := os.WriteFile(filepath.Join(tmp, "model.safetensors.index.json"), idx, 0o644); err != nil {
			return fmt.Errorf("model: quantize: %w", err)
		}
	}
	if err := writeQuantConfig(src, tmp, bits, group); err != nil {
		return err
	}
	if err := copyExtras(src, tmp); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := qt.commit(dst); err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	return nil
}

// quantTempMarker names the lock file a running QuantizeDir holds flock'ed in its
// temporary directory. Its presence, unlocked, is what proves a directory stale.
const quantTempMarker = ".ingot-quantize.lock"

// liveQuantTemps holds the temporary directories of this process's running
// QuantizeDir calls. Cleaners skip them even where the file system's flock does
// not exclude a second lock from the same process (Linux NFS emulates flock with
// per-process POSIX locks).
var liveQuantTemps sync.Map // directory path → struct{}

// quantTemp is the temporary directory one QuantizeDir call writes into.
type quantTemp struct {
	dir       string
	lock      *os.File // the flock'ed marker; nil where flock is unavailable
	committed bool
}

// newQuantTemp creates a temporary directory beside dst and locks its marker.
func newQuantTemp(dst string) (*quantTemp, error) {
	parent, base := filepath.Split(filepath.Clean(dst))
	dir, err := os.MkdirTemp(filepath.Clean(parent), quantTempPrefix(base))
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir) // the key removeStaleQuantTemps looks up
	liveQuantTemps.Store(dir, struct{}{})
	lock, err := lockQuantTemp(dir)
	if err != nil {
		liveQuantTemps.Delete(dir)
		os.RemoveAll(dir)
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return &quantTemp{dir: dir, lock: lock}, nil
}

// commit removes the marker and renames the directory to dst. The lock is still
// held until close, and without a marker no cleaner touches the directory.
func (t *quantTemp) commit(dst string) error {
	if t.lock != nil {
		if err := os.Remove(filepath.Join(t.dir, quantTempMarker)); err != nil {
			return err
		}
	}
	if err := os.Chmod(t.dir, 0o755); err != nil { // MkdirTemp made it private
		return err
	}
	if err := os.Rename(t.dir, dst); err != nil {
		return err
	}
	t.committed = true
	return nil
}

// close removes the directory unless it was committed, then releases the lock.
func (t *quantTemp) close() {
	if !t.committed {
		os.RemoveAll(t.dir)
	}
	liveQuantTemps.Delete(t.dir)
	if t.lock != nil {
		t.lock.Close()
	}
}

// quantTempPrefix is the name of dst's temporary directories (base is dst's last
// element) up to the random digits os.MkdirTemp appends.
func quantTempPrefix(base string) string { return "." + base + ".tmp-" }

// removeStaleQuantTemps removes the temporary directories that earlier QuantizeDir
// calls for dst left when their process was killed (see QuantizeDir for the rule).
// Failures are logged, not returned: leftovers waste space but do not stop a run.
func removeStaleQuantTemps(dst string) {
	parent, base := filepath.Split(filepath.Clean(dst))
	parent = filepath.Clean(parent)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return // no parent yet, so nothing to clean
	}
	prefix := quantTempPrefix(base)
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" || !e.IsDir() {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if _, live := liveQuantTemps.Load(dir); live {
			continue
		}
		removed, err := removeIfStale(dir)
		switch {
		case err != nil:
			slog.Warn("could not remove stale quantize directory", "dir", dir, "err", err)
		case removed:
			slog.Info("removed stale quantize directory", "dir", dir)
		}
	}
}

// planned is one output tensor: either a copy of src or a part ("weight",
// "scales", "biases") of a quantized one.
type planned struct {
	name  string
	dtype string
	shape []int
	size  int64
	src   *stTensor
	part  string // "" (copy), "weight", "scales", "biases"
	bits  int
	group int
}

// quantPlan lists the output tensors in name order and their total size.
func quantPlan(files *weightFiles, bits, group int) ([]planned, int64) {
	names := make([]string, 0, len(files.tensors))
	for n := range files.tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	var plan []planned
	var total int64
	for _, n := range names {
		st := files.tensors[n]
		float := st.DType == "F32" || st.DType == "F16" || st.DType == "BF16"
		if !float || len(st.Shape) != 2 || !strings.HasSuffix(n, ".weight") || st.Shape[1]%group != 0 || st.Shape[1]*bits%32 != 0 {
			plan = append(plan, planned{name: n, dtype: st.DType, shape: st.Shape, size: int64(len(st.Data)), src: st})
			total += int64(len(st.Data))
			continue
		}
		rows, cols := st.Shape[0], st.Shape[1]
		base := strings.TrimSuffix(n, ".weight")
		codes := int64(rows) * int64(cols*bits/8)
		params := int64(rows) * int64(cols/group) * 2
		plan = append(plan,
			planned{name: n, dtype: "U32", shape: []int{rows, cols * bits / 32}, size: codes, src: st, part: "weight", bits: bits, group: group},
			planned{name: base + ".scales", dtype: "BF16", shape: []int{rows, cols / group}, size: params, src: st, part: "scales", bits: bits, group: group},
			planned{name: base + ".biases", dtype: "BF16", shape: []int{rows, cols / group}, size: params, src: st, part: "biases", bits: bits, group: group})
		total += codes + 2*params
	}
	return plan, total
}

// shardPlan splits the plan into files of at most maxShard bytes, keeping the three
// parts of a quantized tensor together.
func shardPlan(plan []planned) [][]planned {
	var out [][]planned
	var cur []planned
	var size int64
	for i := 0; i < len(plan); {
		n := 1
		if plan[i].part == "weight" {
			n = 3
		}
		var s int64
		for _, e := range plan[i : i+n] {
			s += e.size
		}
		if len(cur) > 0 && size+s > maxShard {
			out, cur, size = append(out, cur), nil, 0
		}
		cur, size = append(cur, plan[i:i+n]...), size+s
		i += n
	}
	return append(out, cur)
}

// writeShard writes one safetensors file, quantizing tensors as it goes (one source
// tensor in memory at a time).
func writeShard(ctx context.Context, path string, sh []planned, progress func(int64)) error {
	hdr := map[string]any{"__metadata__": map[string]string{"format": "mlx"}}
	var off int64
	for _, e := range sh {
		hdr[e.name] = map[string]any{"dtype": e.dtype, "shape": e.shape, "data_offsets": []int64{off, off + e.size}}
		off += e.size
	}
	hb, _ := json.Marshal(hdr)
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	defer f.Close()
	w := io.Writer(f)
	if err := binary.Write(w, binary.LittleEndian, uint64(len(hb))); err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	if _, err := w.Write(hb); err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	for i := 0; i < len(sh); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := sh[i]
		if e.part == "" {
			if _, err := w.Write(e.src.Data); err != nil {
				return fmt.Errorf("model: quantize: %w", err)
			}
			progress(e.size)
			continue
		}
		codes, scales, biases, err := quantizeTensor(ctx, e.src, e.bits, e.group)
		if err != nil {
			return err
		}
		for _, b := range [][]byte{bytesOf(codes), u16Bytes(scales), u16Bytes(biases)} {
			if _, err := w.Write(b); err != nil {
				return fmt.Errorf("model: quantize: %w", err)
			}
			progress(int64(len(b)))
		}
		i += 2 // scales and biases were written with the codes
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	return f.Close()
}

// quantizeTensor quantizes a (rows, cols) float tensor with quantizeStored on
// every core, and stops within a block of rows when ctx is cancelled.
func quantizeTensor(ctx context.Context, st *stTensor, bits, group int) (codes []uint32, scales, biases []uint16, err error) {
	return quantizeStored(ctx, st, st.Shape[0], st.Shape[1], bits, group, runtime.GOMAXPROCS(0), nil)
}

func u16Bytes(x []uint16) []byte {
	b := make([]byte, 2*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
	return b
}

// writeQuantConfig copies config.json with the quantization blocks mlx-lm writes.
func writeQuantConfig(src, dst string, bits, group int) error {
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("model: quantize: %s: %v", filepath.Join(src, "config.json"), err)
	}
	q := map[string]any{"group_size": group, "bits": bits, "mode": "affine"}
	c["quantization"], c["quantization_config"] = q, q
	out, _ := json.MarshalIndent(c, "", "    ")
	return os.WriteFile(filepath.Join(dst, "config.json"), append(out, '\n'), 0o644)
}

// copyExtras copies the files mlx-lm carries over (tokenizer and generation
// configs, chat templates, tokenizer models, code, model card), but not the weights
// or config.json.
func copyExtras(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("model: quantize: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		keep := false
		for _, ext := range []string{".json", ".model", ".tiktoken", ".txt", ".jinja", ".py", ".md"} {
			keep = keep || strings.HasSuffix(n, ext)
		}
		if !e.Type().IsRegular() || !keep || n == "config.json" || n == "model.safetensors.index.json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, n))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, n), b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("model: quantize: %w", err)
		}
	}
	return nil
}
