// Package benchtool is ingot's llama-bench: end-to-end prefill (pp) and decode (tg)
// throughput of a model directory or of a synthetic model with a named real shape,
// with every decode figure also given as a fraction of the machine's measured
// memory bandwidth. `go run ./bench` and `run bench` both call [Main].
package benchtool

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
	"github.com/ingot-llm/ingot/model"
)

// Result is one row of output; the JSON names are a contract.
type Result struct {
	Model       string  `json:"model"`
	DType       string  `json:"dtype"`
	Backend     string  `json:"backend"`
	Threads     int     `json:"threads"`
	Test        string  `json:"test"`
	Reps        int     `json:"reps"`
	TokS        float64 `json:"tok_s"`
	TokSSD      float64 `json:"tok_s_sd"`
	GBs         float64 `json:"gb_s"`        // weight bytes read per second (decode); per pass (prefill)
	BWFraction  float64 `json:"bw_fraction"` // gb_s / bandwidth_gb_s
	GFLOPs      float64 `json:"gflop_s"`
	WeightBytes int64   `json:"weight_bytes"`
	KV          string  `json:"kv"`             // the KV cache's type: f32 or f16
	BandwidthGB float64 `json:"bandwidth_gb_s"` // the probe (a multi-threaded read of 512 MB) over the test: its bytes ÷ the time they take at each stretch's probe figure (see run); 0 on GPU backends (no probe)

	// kernel tests (see kernels.go): tok_s is calls per second
	USPerCall    float64 `json:"us_per_call,omitempty"`
	GPUUSPerCall float64 `json:"gpu_us_per_call,omitempty"` // from GPU timestamps (Metal)

	// the load test (see loadRow)
	LoadS      float64 `json:"load_s,omitempty"`          // model.Load (or model.Synthetic) to its return
	ReadyS     float64 `json:"ready_s,omitempty"`         // load_s, then a 16-token session and one decoded token
	CPUS       float64 `json:"cpu_s,omitempty"`           // the process's user+system CPU seconds over ready_s (Unix): on a shared machine, its own work
	PeakRSS    int64   `json:"peak_rss_bytes,omitempty"`  // the process's peak resident set over the load and that token
	PeakRSSSrc string  `json:"peak_rss_source,omitempty"` // where peak_rss_bytes comes from: VmHWM (Linux, reset before loading), ru_maxrss (other Unix: since the process began); absent where not measured
}

// test is "pp512" (prefill 512 tokens), "tg128" (decode 128 tokens one by
// one), either after a context of depth tokens ("tg128@d1024", as llama-bench's
// -d), a kernel test (see kernels.go: mv, mvc, mvf, mm512, norm, rope, attn512),
// or "load" (see loadRow).
type test struct {
	name    string
	prefill bool
	kernel  bool
	load    bool
	n       int
	depth   int
}

func parseTests(s string) ([]test, error) {
	var ts []test
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "mv", "mvc", "mvf", "norm", "rope":
			ts = append(ts, test{name: f, kernel: true})
			continue
		case "load":
			ts = append(ts, test{name: f, load: true})
			continue
		}
		spec, depth, deep := strings.Cut(f, "@d")
		num := strings.TrimLeft(spec, "abcdefghijklmnopqrstuvwxyz")
		kind := spec[:len(spec)-len(num)]
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-test %q: want ppN, tgN, mv, mvc, mvf, mmN, norm, rope, attnN with N > 0, or load", f)
		}
		d := 0
		if deep {
			if d, err = strconv.Atoi(depth); err != nil || d <= 0 || (kind != "pp" && kind != "tg") {
				return nil, fmt.Errorf("-test %q: want ppN@dM or tgN@dM with M > 0", f)
			}
		}
		switch kind {
		case "pp", "tg":
			ts = append(ts, test{name: f, prefill: kind == "pp", n: n, depth: d})
		case "mm", "attn":
			ts = append(ts, test{name: f, kernel: true, n: n})
		default:
			return nil, fmt.Errorf("-test %q: want ppN, tgN, mv, mvc, mvf, mmN, norm, rope, attnN or load", f)
		}
	}
	return ts, nil
}

// Main runs the benchmark tool with args (without the program name) and returns
// the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("model", "", "model directory (default: a synthetic model, see -shape)")
	shape := fs.String("shape", "llama-3.2-1b", "synthetic model shape: "+strings.Join(model.ShapeNames(), ", "))
	dtype := fs.String("dtype", "", "weights: q4, q8, bf16, f16 or f32 (default: q4 for a synthetic model; with -model: as stored, or q4/q8 quantizes on load)")
	tests := fs.String("test", "pp512,tg128", "comma-separated tests: ppN (prefill N tokens), tgN (decode N tokens), either with @dM after a context of M tokens (tg128@d1024); kernels: mv (mat-vecs), mvc (mat-vecs with the weights in cache), mvf (q/k/v and gate/up mat-vecs, one call each), mmN (mat-mats at L=N), norm, rope, attnN (decode attention over N positions); load (seconds to a loaded and to a ready model, and peak RSS)")
	threads := fs.Int("threads", 0, "CPU threads (0: all physical cores)")
	reps := fs.Int("reps", 3, "repetitions per test")
	backend := fs.String("backend", "cpu", "backend: cpu, metal, metal-emu (the MSL interpreter: slow) or auto")
	kv := fs.String("kv", "f32", "KV cache type: f32 or f16")
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	seed := fs.Uint64("seed", 1, "seed of the synthetic weights and prompt tokens")
	verbose := fs.Bool("v", false, "log details to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if err := run(ctx, *dir, *shape, *dtype, *tests, *threads, *reps, *backend, *kv, *asJSON, *seed, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, dir, shape, dtype, tests string, threads, reps int, backend, kv string, asJSON bool, seed uint64, stdout, stderr io.Writer) error {
	ts, err := parseTests(tests)
	if err != nil {
		return err
	}
	if reps < 1 {
		return errors.New("-reps must be at least 1")
	}
	if threads <= 0 {
		threads = kernels.DefaultThreads()
	}
	asStored := dir != "" && dtype == ""
	if dtype == "" {
		dtype = "q4"
	}
	dt, err := parseDType(dtype)
	if err != nil {
		return err
	}
	kvt, err := model.ParseKV(kv)
	if err != nil {
		return fmt.Errorf("-kv: %w", err)
	}
	maxPP := 1
	for _, t := range ts {
		if t.prefill {
			maxPP = max(maxPP, t.n)
		}
	}
	kernelsOnly := true
	for _, t := range ts {
		kernelsOnly = kernelsOnly && t.kernel
	}
	ctxLen := 1
	for _, t := range ts {
		if !t.kernel {
			ctxLen = max(ctxLen, t.depth+t.n+1)
		}
	}
	b, err := kernels.Open(backend, threads)
	if err != nil {
		return err
	}
	defer b.Close()
	o := model.Options{Backend: b}
	progress(stderr, "loading %s", nameOf(dir, shape))
	var lt loadTimer
	if slices.ContainsFunc(ts, func(t test) bool { return t.load }) {
		lt.start()
	}
	var m *model.Model
	if dir != "" {
		if dt.Quantized() && !asStored {
			o.Quant = dt.Bits()
		}
		m, err = model.Load(ctx, dir, o)
	} else {
		m, err = model.Synthetic(ctx, shape, dt, seed, o)
	}
	if err != nil {
		return err
	}
	defer m.Close()
	lt.loaded()
	switch {
	case m.GGUFTypes != "" && (asStored || !dt.Quantized()):
		dtype = m.GGUFTypes // "Q4_K×129 Q6_K×33 F32×65"
	case m.GGUFTypes != "": // only float matrices are quantized on load
		dtype += " on load; " + m.GGUFTypes
	case dir != "" && (asStored || !dt.Quantized()):
		dtype = storedDType(m.Config)
	}
	var load Result
	if lt.on {
		if load, err = lt.ready(ctx, m, kvt); err != nil {
			return err
		}
		load.Model, load.DType, load.Backend, load.Threads, load.Test, load.Reps = nameOf(dir, shape), dtype, b.Name(), threads, "load", 1
		load.WeightBytes, load.KV = m.WeightBytes(), kv
	}
	if !slices.ContainsFunc(ts, func(t test) bool { return !t.load }) {
		return printResults([]Result{load}, asJSON, stdout, stderr)
	}
	sess, err := m.NewSession(model.SessionOptions{Context: ctxLen, Batch: maxPP, KV: kvt})
	if err != nil {
		return err
	}
	// The probe reads host memory: it bounds the CPU backend's decode, not a
	// GPU's (their rows leave the bandwidth columns empty).
	var probe *cpu.BandwidthProbe
	if b.Name() == "cpu" {
		progress(stderr, "measuring memory bandwidth (%d threads)", threads)
		pool := cpu.NewPool(threads)
		defer pool.Close()
		probe = cpu.NewBandwidthProbe(pool, 512<<20)
	}

	rng := rand.New(rand.NewPCG(seed, 7))
	var results []Result
	for _, t := range ts {
		if t.load {
			results = append(results, load)
			continue
		}
		if t.kernel {
			rs, err := runKernels(ctx, b, m.Config, dt, kvt, dtype, nameOf(dir, shape), t, threads, reps, probe, seed, stderr)
			if err != nil {
				return err
			}
			results = append(results, rs...)
			continue
		}
		tokens := make([]int32, t.depth+t.n) // the context, then the test's own
		for i := range tokens {
			tokens[i] = int32(rng.IntN(m.Config.VocabSize))
		}
		sess.Truncate(0)
		if t.depth > 0 {
			progress(stderr, "%s %s: %s: a context of %d tokens", nameOf(dir, shape), dtype, t.name, t.depth)
			if _, err := sess.Forward(ctx, tokens[:t.depth]); err != nil {
				return err
			}
		}
		tokens = tokens[t.depth:]
		// The probe runs before the test and after every stretch (a prefill,
		// or segTokens tokens of a decode): a VM's bandwidth can change by 2×
		// within seconds, so each stretch of the test is compared with the
		// bandwidth of its own moments: ideal adds up the time each stretch
		// would take to read its weight bytes at the mean of the probe's
		// figures (medians of three passes) before and after it, and the
		// test's bandwidth is the bytes read ÷ ideal.
		const segTokens = 32
		wb := float64(m.ActiveWeightBytes()) // a mixture of experts: the k experts a token reads
		var rates []float64
		var ideal, read float64 // seconds at the probe's bandwidth, bytes
		bw := median(sample(probe, 3, nil))
		for r := -1; r < reps; r++ { // r = -1 is a warm-up
			progress(stderr, "%s %s: %s rep %d/%d", nameOf(dir, shape), dtype, t.name, max(r+1, 0), reps)
			sess.Truncate(t.depth) // the context stays cached
			var secs float64
			for i := 0; i < len(tokens); {
				if err := ctx.Err(); err != nil {
					return err
				}
				n, passes := len(tokens)-i, 1.0 // a prefill is one stretch, one pass over the weights
				if !t.prefill {
					n = min(n, segTokens)
					passes = float64(n) // one pass per decoded token
				}
				st, _ := sess.Backend().(statser)
				var gpu0 time.Duration
				if st != nil {
					gpu0 = st.Stats().GPUTime
				}
				start := time.Now()
				if t.prefill {
					_, err = sess.Forward(ctx, tokens)
				} else {
					for _, tok := range tokens[i : i+n] {
						if _, err = sess.Forward(ctx, []int32{tok}); err != nil {
							break
						}
					}
				}
				if err != nil {
					return err
				}
				d := time.Since(start).Seconds()
				after := median(sample(probe, 3, nil))
				if r >= 0 {
					secs += d
					ideal += passes * wb / ((bw + after) / 2 * 1e9)
					read += passes * wb
					var busy float64 // the device's share of the stretch (command buffers' GPU time)
					if st != nil {
						busy = (st.Stats().GPUTime - gpu0).Seconds() / d
					}
					slog.Debug("bench stretch", "test", t.name, "rep", r, "tokens", n, "tok_s", float64(n)/d, "probe_gb_s", []float64{bw, after}, "gpu_busy", busy)
				}
				bw = after
				i += n
			}
			if r >= 0 {
				rates = append(rates, float64(len(tokens))/secs)
			}
		}
		mean, sd := meanSD(rates)
		res := Result{Model: nameOf(dir, shape), DType: dtype, Backend: b.Name(), Threads: threads, Test: t.name, Reps: reps,
			TokS: mean, TokSSD: sd, WeightBytes: m.WeightBytes(), KV: kv}
		if t.prefill {
			res.GBs = wb * mean / float64(t.n) / 1e9
			res.GFLOPs = prefillFLOPs(m.Config, t.n) * mean / float64(t.n) / 1e9
		} else {
			res.GBs = wb * mean / 1e9
			res.GFLOPs = decodeFLOPs(m.Config) * mean / 1e9
		}
		res.BandwidthGB = read / ideal / 1e9
		res.BWFraction = res.GBs / res.BandwidthGB
		results = append(results, res)
	}
	for i := range results {
		if r := &results[i]; probe == nil {
			r.BandwidthGB, r.BWFraction = 0, 0
		}
	}
	return printResults(results, asJSON, stdout, stderr)
}

// printResults writes the rows as a JSON array or as tables: one of the
// throughput and kernel rows, then one of the load rows.
func printResults(results []Result, asJSON bool, stdout, stderr io.Writer) error {
	fmt.Fprint(stderr, "\r\033[K")
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	var loads []Result
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if slices.ContainsFunc(results, func(r Result) bool { return r.Test != "load" }) {
		fmt.Fprintf(w, "model\tdtype\tkv\tbackend\tthreads\ttest\ttok/s\tGB/s\tbandwidth GB/s\t%% of it\tGFLOP/s\t\n")
	}
	for _, r := range results {
		if r.Test == "load" {
			loads = append(loads, r)
			continue
		}
		if r.USPerCall > 0 {
			us := fmt.Sprintf("%.1f µs", r.USPerCall)
			if r.GPUUSPerCall > 0 {
				us += fmt.Sprintf(" (GPU %.1f µs)", r.GPUUSPerCall)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%.1f\t%s\t%.1f\t\n", r.Model, r.DType, r.KV, r.Backend, r.Threads, r.Test, us, r.GBs, bwCols(r), r.GFLOPs)
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%.2f ± %.2f\t%.1f\t%s\t%.1f\t\n", r.Model, r.DType, r.KV, r.Backend, r.Threads, r.Test, r.TokS, r.TokSSD, r.GBs, bwCols(r), r.GFLOPs)
	}
	if err := w.Flush(); err != nil || len(loads) == 0 {
		return err
	}
	if len(loads) < len(results) {
		fmt.Fprintln(stdout)
	}
	w = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "model\tdtype\tbackend\tthreads\ttest\tloaded s\tready s\tCPU s\tweights GB\tpeak RSS GB\t\n")
	for _, r := range loads {
		rss := "-"
		if r.PeakRSS > 0 {
			rss = fmt.Sprintf("%.2f (%s)", float64(r.PeakRSS)/1e9, r.PeakRSSSrc)
		}
		cpu := "-"
		if r.CPUS > 0 {
			cpu = fmt.Sprintf("%.2f", r.CPUS)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%.2f\t%.2f\t%s\t%.2f\t%s\t\n", r.Model, r.DType, r.Backend, r.Threads, r.Test, r.LoadS, r.ReadyS, cpu, float64(r.WeightBytes)/1e9, rss)
	}
	return w.Flush()
}

// loadTimer times the load test: [model.Load] (or [model.Synthetic]) to its
// return, then to a model ready to decode, and the process's peak resident set
// over both. The bench loads before it does anything else, so the peak is the
// load's: on Linux it is reset just before (the Go heap returned to the system
// first); elsewhere it is the process's since it began.
type loadTimer struct {
	on        bool
	t0        time.Time
	cpu0      float64
	loadS     float64
	fromReset bool
}

func (lt *loadTimer) start() {
	lt.on = true
	debug.FreeOSMemory()
	lt.fromReset = resetPeakRSS()
	lt.cpu0 = cpuTime()
	lt.t0 = time.Now()
}

func (lt *loadTimer) loaded() {
	if lt.on {
		lt.loadS = time.Since(lt.t0).Seconds()
	}
}

// ready opens a 16-token session on m, decodes one token and closes it (work a
// backend defers to first use counts), and returns the load row's figures.
func (lt *loadTimer) ready(ctx context.Context, m *model.Model, kv kernels.DType) (Result, error) {
	s, err := m.NewSession(model.SessionOptions{Context: 16, Batch: 1, KV: kv})
	if err != nil {
		return Result{}, err
	}
	_, err = s.Forward(ctx, []int32{0})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, err
	}
	r := Result{LoadS: lt.loadS, ReadyS: time.Since(lt.t0).Seconds()}
	if c := cpuTime(); c > 0 {
		r.CPUS = c - lt.cpu0
	}
	r.PeakRSS, r.PeakRSSSrc = peakRSS()
	if r.PeakRSSSrc == "VmHWM" && !lt.fromReset {
		r.PeakRSSSrc = "VmHWM since start" // clear_refs refused (before Linux 4.0, or a sandbox)
	}
	return r, nil
}

// storedDType names a directory's weights as stored: MLX quantization's
// bits ("q4") where config.json has it, else its dtype or torch_dtype.
func storedDType(c *model.Config) string {
	var q struct {
		Bits int    `json:"bits"`
		Mode string `json:"mode"`
	}
	if json.Unmarshal(c.Quantization, &q) == nil && q.Bits > 0 {
		if q.Mode != "" && q.Mode != "affine" {
			return q.Mode
		}
		return fmt.Sprintf("q%d", q.Bits)
	}
	return c.DType + c.TorchDType
}

func nameOf(dir, shape string) string {
	if dir != "" {
		return dir
	}
	return shape
}

func progress(w io.Writer, format string, a ...any) {
	fmt.Fprintf(w, "\r\033[K"+format, a...)
}

func parseDType(s string) (kernels.DType, error) {
	for _, d := range []kernels.DType{kernels.DTypeF32, kernels.DTypeF16, kernels.DTypeBF16, kernels.DTypeQ4, kernels.DTypeQ8} {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("-dtype %q: want q4, q8, bf16, f16 or f32", s)
}

// bwCols formats the probe's bandwidth and the fraction of it, or dashes
// where there is no probe (GPU backends).
func bwCols(r Result) string {
	if r.BandwidthGB == 0 {
		return "-\t-"
	}
	return fmt.Sprintf("%.1f\t%.0f%%", r.BandwidthGB, 100*r.BWFraction)
}

// sample appends n passes of probe to s (zeros without a probe).
func sample(probe *cpu.BandwidthProbe, n int, s []float64) []float64 {
	for range n {
		if probe == nil {
			s = append(s, 0)
			continue
		}
		s = append(s, probe.Sample())
	}
	return s
}

func median(x []float64) float64 {
	x = slices.Clone(x)
	slices.Sort(x)
	return x[len(x)/2]
}

func meanSD(x []float64) (mean, sd float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x)-1))
}

// layerMACs is the multiply-adds of one token through one layer's projections.
func layerMACs(c *model.Config) float64 {
	D, F := float64(c.HiddenSize), float64(c.IntermediateSize)
	q, kv := float64(c.NumHeads*c.HeadDim), float64(c.NumKVHeads*c.HeadDim)
	return D*q + 2*D*kv + q*D + 3*D*F
}

// decodeFLOPs is one decode step at a short context (attention is negligible).
func decodeFLOPs(c *model.Config) float64 {
	return 2 * (float64(c.NumLayers)*layerMACs(c) + float64(c.HiddenSize*c.VocabSize))
}

// prefillFLOPs is a prefill of n tokens: projections for every token, causal
// attention (QKᵀ and AV over n²/2 pairs) and the LM head for the last token only.
func prefillFLOPs(c *model.Config, n int) float64 {
	N := float64(n)
	attn := 2 * 2 * float64(c.NumHeads*c.HeadDim) * N * N / 2
	return 2*N*float64(c.NumLayers)*layerMACs(c) + float64(c.NumLayers)*attn + 2*float64(c.HiddenSize*c.VocabSize)
}
