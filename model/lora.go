package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/ingot-llm/ingot/kernels"
	"github.com/ingot-llm/ingot/kernels/cpu"
)

// An Adapter is a LoRA adapter loaded for one [Model]: for each adapted
// linear module y = W·x (+ b) + s·B·(A·x), A (r, in) and s·B (out, r) on the
// model's backend, applied unfused at run time so that the base weights are
// shared by the base and any number of adapters. Sessions choose theirs
// with [Session.SetAdapter]. An Adapter is read-only and safe for
// concurrent use.
type Adapter struct {
	m      *Model
	dir    string
	format string              // "peft" or "mlx"
	layers [][nSlots]*loraProj // per layer, per output slot; nil: not adapted
	rank   int                 // largest r
	bytes  int64
	closed atomic.Bool
}

// The output slots a LoRA module adds into: the projections of a decoder
// layer as the forward pass computes them (Phi-3's fused qkv_proj feeds q, k
// and v, its gate_up_proj gate and up).
const (
	slotQ = iota
	slotK
	slotV
	slotO
	slotGate
	slotUp
	slotDown
	slotAttnGate // Qwen3.5's attention gate: the gate rows of its q_proj
	nSlots
)

// slotNames names the slots in errors.
var slotNames = [nSlots]string{"q", "k", "v", "o", "gate", "up", "down", "attention gate"}

// loraProj is one slot's adapter: dst += (x·Aᵀ)·(s·B)ᵀ. Slots fed by one
// fused module share a.
type loraProj struct {
	a *kernels.Tensor // (r, in)
	b *kernels.Tensor // (out, r), scaled by s
}

// loraModule is one adapted module as read from an adapter's files, on the
// host: A (r, in) and s·B (out, r) in f32.
type loraModule struct {
	layer   int
	name    string // "self_attn.q_proj", "mlp.gate_up_proj", …
	r       int
	in, out int
	a, b    []float32
}

// loraTargets are the module names an adapter may target, with the output
// slots each feeds (a fused module's rows split as the model splits its
// weight; see loadPhi3).
var loraTargets = map[string][]int{
	"self_attn.q_proj":   {slotQ},
	"self_attn.k_proj":   {slotK},
	"self_attn.v_proj":   {slotV},
	"self_attn.o_proj":   {slotO},
	"mlp.gate_proj":      {slotGate},
	"mlp.up_proj":        {slotUp},
	"mlp.down_proj":      {slotDown},
	"self_attn.qkv_proj": {slotQ, slotK, slotV},
	"mlp.gate_up_proj":   {slotGate, slotUp},
}

// loraDims returns the input and output widths of module name under config c
// (a fused module's output is the fused projection's), or ok false for a
// name that is not a LoRA target.
func loraDims(c *Config, name string) (in, out int, ok bool) {
	D, F := c.HiddenSize, c.IntermediateSize
	q, kv := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	switch name {
	case "self_attn.q_proj":
		if architectures[c.Arch()].qwen35 {
			q *= 2 // each head's query, then its gate
		}
		return D, q, true
	case "self_attn.k_proj", "self_attn.v_proj":
		return D, kv, true
	case "self_attn.o_proj":
		return q, D, true
	case "mlp.gate_proj", "mlp.up_proj":
		return D, F, true
	case "mlp.down_proj":
		return F, D, true
	case "self_attn.qkv_proj":
		return D, q + 2*kv, true
	case "mlp.gate_up_proj":
		return D, 2 * F, true
	}
	return 0, 0, false
}

// loraSlots returns the output slots module name feeds in this model and,
// per slot, the rows of the module's output (out, as loraDims gives it) it
// receives: the whole output, or a fused module's rows split as the model
// splits its weight (loadPhi3, loadGatedQ).
func (m *llama) loraSlots(name string) ([]int, [][][2]int) {
	c := m.cfg
	q, kv, F, Dh := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim, c.IntermediateSize, c.HeadDim
	switch {
	case name == "self_attn.qkv_proj":
		return loraTargets[name], [][][2]int{{{0, q}}, {{q, q + kv}}, {{q + kv, q + 2*kv}}}
	case name == "mlp.gate_up_proj":
		return loraTargets[name], [][][2]int{{{0, F}}, {{F, 2 * F}}}
	case name == "self_attn.q_proj" && m.arch.qwen35: // each head's query rows, then its gate rows
		qr, gr := make([][2]int, c.NumHeads), make([][2]int, c.NumHeads)
		for h := range c.NumHeads {
			qr[h], gr[h] = [2]int{2 * h * Dh, 2*h*Dh + Dh}, [2]int{2*h*Dh + Dh, 2 * (h + 1) * Dh}
		}
		return []int{slotQ, slotAttnGate}, [][][2]int{qr, gr}
	}
	_, out, _ := loraDims(c, name)
	return loraTargets[name], [][][2]int{{{0, out}}}
}

// peftConfig is the part of PEFT's adapter_config.json ingot reads.
type peftConfig struct {
	PeftType      string             `json:"peft_type"`
	R             int                `json:"r"`
	Alpha         float64            `json:"lora_alpha"`
	TargetModules json.RawMessage    `json:"target_modules"` // a list of names, or a regular expression
	RSLoRA        bool               `json:"use_rslora"`
	DoRA          bool               `json:"use_dora"`
	FanInFanOut   bool               `json:"fan_in_fan_out"`
	Bias          string             `json:"bias"`
	LoraBias      bool               `json:"lora_bias"`
	ModulesToSave []string           `json:"modules_to_save"`
	RankPattern   map[string]int     `json:"rank_pattern"`
	AlphaPattern  map[string]float64 `json:"alpha_pattern"`
	// Variants whose forward pass is not y = W·x + s·B·(A·x): refused when set.
	Variants struct {
		Alora      json.RawMessage `json:"alora_invocation_tokens"`
		QALoRA     json.RawMessage `json:"use_qalora"`
		Tokens     json.RawMessage `json:"trainable_token_indices"`
		Replicate  json.RawMessage `json:"layer_replication"`
		Arrow      json.RawMessage `json:"arrow_config"`
		KaSA       json.RawMessage `json:"kasa_config"`
		BDLoRA     json.RawMessage `json:"use_bdlora"`
		Parameters json.RawMessage `json:"target_parameters"`
	}

	targets             []string         // TargetModules as a list; nil for a regular expression
	patterns            []*regexp.Regexp // RankPattern's then AlphaPattern's keys, compiled, sorted by key
	rankKeys, alphaKeys []string
}

// parsePEFTConfig parses and checks a PEFT adapter_config.json.
func parsePEFTConfig(b []byte) (*peftConfig, error) {
	var c peftConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("model: adapter_config.json: %v", err)
	}
	if err := json.Unmarshal(b, &c.Variants); err != nil {
		return nil, fmt.Errorf("model: adapter_config.json: %v", err)
	}
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("model: adapter_config.json: %s: %s", field, fmt.Sprintf(format, a...))
	}
	switch {
	case c.PeftType != "LORA":
		return nil, bad("peft_type", "%q: ingot loads LORA adapters only", c.PeftType)
	case c.R <= 0:
		return nil, bad("r", "%d: want a rank > 0", c.R)
	case c.Alpha <= 0 || math.IsInf(c.Alpha, 0):
		return nil, bad("lora_alpha", "%v: want > 0", c.Alpha)
	case c.DoRA:
		return nil, bad("use_dora", "true: DoRA (weight-decomposed LoRA) is not supported")
	case c.FanInFanOut:
		return nil, bad("fan_in_fan_out", "true: transposed (Conv1D, GPT-2-style) weights are not supported")
	case c.Bias != "" && c.Bias != "none":
		return nil, bad("bias", "%q: adapters that train biases are not supported (want \"none\")", c.Bias)
	case c.LoraBias:
		return nil, bad("lora_bias", "true: a bias on lora_B is not supported")
	case len(c.ModulesToSave) > 0:
		return nil, bad("modules_to_save", "%q: fully trained modules are not supported", c.ModulesToSave)
	}
	v := &c.Variants
	for _, f := range []struct {
		field string
		raw   json.RawMessage
	}{{"alora_invocation_tokens", v.Alora}, {"use_qalora", v.QALoRA}, {"trainable_token_indices", v.Tokens}, {"layer_replication", v.Replicate},
		{"arrow_config", v.Arrow}, {"kasa_config", v.KaSA}, {"use_bdlora", v.BDLoRA}, {"target_parameters", v.Parameters}} {
		switch string(bytes.TrimSpace(f.raw)) {
		case "", "null", "false", "[]", "{}":
		default:
			return nil, bad(f.field, "%s: this LoRA variant is not supported", f.raw)
		}
	}
	if len(c.TargetModules) > 0 && !bytes.Equal(c.TargetModules, []byte("null")) {
		var s string
		if err := json.Unmarshal(c.TargetModules, &c.targets); err != nil {
			if json.Unmarshal(c.TargetModules, &s) != nil {
				return nil, bad("target_modules", "want a list of module names or a string")
			}
			c.targets = nil // a regular expression or "all-linear": the tensors say which
		}
		for _, t := range c.targets {
			if _, ok := loraTargets["self_attn."+t]; ok {
				continue
			}
			if _, ok := loraTargets["mlp."+t]; ok {
				continue
			}
			return nil, bad("target_modules", "%q: ingot adapts q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, qkv_proj and gate_up_proj", t)
		}
	}
	for k, r := range c.RankPattern {
		if r <= 0 {
			return nil, bad("rank_pattern", "%q: %d: want a rank > 0", k, r)
		}
		c.rankKeys = append(c.rankKeys, k)
	}
	for k, a := range c.AlphaPattern {
		if a <= 0 || math.IsInf(a, 0) || math.IsNaN(a) {
			return nil, bad("alpha_pattern", "%q: %v: want > 0", k, a)
		}
		c.alphaKeys = append(c.alphaKeys, k)
	}
	slices.Sort(c.rankKeys)
	slices.Sort(c.alphaKeys)
	for _, k := range append(slices.Clone(c.rankKeys), c.alphaKeys...) {
		re, err := regexp.Compile(`^(?:.*\.)?(?:` + k + `)$`) // PEFT: re.match(rf"(.*\.)?({key})$", name)
		if err != nil {
			field := "rank_pattern"
			if !slices.Contains(c.rankKeys, k) {
				field = "alpha_pattern"
			}
			return nil, bad(field, "%q: %v", k, err)
		}
		c.patterns = append(c.patterns, re)
	}
	return &c, nil
}

// rankAlpha returns the rank and alpha of module (its full name,
// "model.layers.0.self_attn.q_proj"), after rank_pattern and alpha_pattern.
func (c *peftConfig) rankAlpha(module string) (int, float64) {
	r, a := c.R, c.Alpha
	for i, k := range c.rankKeys {
		if c.patterns[i].MatchString(module) {
			r = c.RankPattern[k]
			break
		}
	}
	for i, k := range c.alphaKeys {
		if c.patterns[len(c.rankKeys)+i].MatchString(module) {
			a = c.AlphaPattern[k]
			break
		}
	}
	return r, a
}

// mlxConfig is mlx-lm's adapter_config.json.
type mlxConfig struct {
	FineTuneType *string `json:"fine_tune_type"`
	NumLayers    *int    `json:"num_layers"`
	UseDoRA      bool    `json:"use_dora"` // older mlx-lm
	Params       *struct {
		Rank  *int     `json:"rank"`
		Scale *float64 `json:"scale"`
		Keys  []string `json:"keys"`
	} `json:"lora_parameters"`
}

// parseMLXConfig parses and checks an mlx-lm adapter_config.json.
func parseMLXConfig(b []byte) (*mlxConfig, error) {
	var c mlxConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("model: adapter_config.json: %v", err)
	}
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("model: adapter_config.json: %s: %s", field, fmt.Sprintf(format, a...))
	}
	switch {
	case c.FineTuneType != nil && *c.FineTuneType != "lora":
		return nil, bad("fine_tune_type", "%q: ingot loads \"lora\" adapters only", *c.FineTuneType)
	case c.UseDoRA:
		return nil, bad("use_dora", "true: DoRA is not supported")
	case c.NumLayers == nil:
		return nil, bad("num_layers", "missing")
	case *c.NumLayers == 0 || *c.NumLayers < -1:
		return nil, bad("num_layers", "%d: want > 0, or -1 for all layers", *c.NumLayers)
	case c.Params == nil:
		return nil, bad("lora_parameters", "missing")
	case c.Params.Rank == nil || *c.Params.Rank <= 0:
		return nil, bad("lora_parameters.rank", "missing or ≤ 0")
	case c.Params.Scale == nil || math.IsNaN(*c.Params.Scale) || math.IsInf(*c.Params.Scale, 0):
		return nil, bad("lora_parameters.scale", "missing or not a finite number")
	}
	for _, k := range c.Params.Keys {
		if _, ok := loraTargets[k]; !ok {
			return nil, bad("lora_parameters.keys", "%q: ingot adapts self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, self_attn.qkv_proj and mlp.gate_up_proj", k)
		}
	}
	return &c, nil
}

var (
	// The decoder layers' names, also as multimodal checkpoints nest them
	// (language_model.model.layers, model.language_model.layers).
	peftKey = regexp.MustCompile(`^base_model\.model\.(?:language_model\.)?model\.(?:language_model\.)?layers\.(\d+)\.((?:self_attn|mlp)\.[a-z_]+)\.lora_([AB])\.weight$`)
	mlxKey  = regexp.MustCompile(`^(?:language_model\.)?model\.(?:language_model\.)?layers\.(\d+)\.((?:self_attn|mlp)\.[a-z_]+)\.lora_([ab])$`)
)

// readAdapter reads the adapter in dir, PEFT (adapter_model.safetensors) or
// mlx-lm (adapters.safetensors), checking every tensor against config c,
// and returns its format and modules, sorted by layer and name.
func readAdapter(dir string, c *Config) (string, []loraModule, error) {
	format, weights := "", ""
	for _, f := range []struct{ format, file string }{{"peft", "adapter_model.safetensors"}, {"mlx", "adapters.safetensors"}} {
		if _, err := os.Stat(filepath.Join(dir, f.file)); err == nil {
			format, weights = f.format, f.file
			break
		}
	}
	if format == "" {
		if _, err := os.Stat(filepath.Join(dir, "adapter_model.bin")); err == nil {
			return "", nil, fmt.Errorf("model: adapter %s: adapter_model.bin (pickle) is not read: save it as safetensors (PEFT save_pretrained(safe_serialization=True))", dir)
		}
		return "", nil, fmt.Errorf("model: adapter %s: no adapter_model.safetensors (PEFT) or adapters.safetensors (mlx-lm)", dir)
	}
	cb, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		return "", nil, fmt.Errorf("model: adapter %s: %w", dir, err)
	}
	wb, err := os.ReadFile(filepath.Join(dir, weights))
	if err != nil {
		return "", nil, fmt.Errorf("model: adapter %s: %w", dir, err)
	}
	ts, _, err := parseSafetensors(filepath.Join(dir, weights), wb)
	if err != nil {
		return "", nil, err
	}
	var mods []loraModule
	if format == "peft" {
		pc, err := parsePEFTConfig(cb)
		if err != nil {
			return "", nil, err
		}
		mods, err = peftModules(c, pc, ts)
		if err != nil {
			return "", nil, err
		}
	} else {
		mc, err := parseMLXConfig(cb)
		if err != nil {
			return "", nil, err
		}
		mods, err = mlxModules(c, mc, ts)
		if err != nil {
			return "", nil, err
		}
	}
	if len(mods) == 0 {
		return "", nil, fmt.Errorf("model: adapter %s: %s holds no LoRA weights", dir, weights)
	}
	return format, mods, nil
}

// pairs groups an adapter file's tensors by (layer, module): each key names
// a layer, a module and which of the two matrices ("A"/"a" first) it is.
func pairs(c *Config, ts map[string]*stTensor, key *regexp.Regexp, form string) (map[[2]string][2]*stTensor, error) {
	out := map[[2]string][2]*stTensor{}
	for _, name := range slices.Sorted(maps.Keys(ts)) { // the first bad tensor by name, every time
		st := ts[name]
		m := key.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("model: adapter tensor %q: not a LoRA weight of a decoder layer (want %s)", name, form)
		}
		i, err := strconv.Atoi(m[1])
		if err != nil || i >= c.NumLayers {
			return nil, fmt.Errorf("model: adapter tensor %q: layer %s: the model has %d layers", name, m[1], c.NumLayers)
		}
		if _, ok := loraTargets[m[2]]; !ok {
			return nil, fmt.Errorf("model: adapter tensor %q: module %s is not one ingot adapts", name, m[2])
		}
		k := [2]string{m[1], m[2]}
		p := out[k]
		j := 0
		if m[3] == "B" || m[3] == "b" {
			j = 1
		}
		p[j] = st
		out[k] = p
	}
	for _, p := range out {
		for j, st := range p {
			if st == nil {
				return nil, fmt.Errorf("model: adapter tensor %q has no %s partner", p[1-j].Name, [2]string{"A", "B"}[j])
			}
		}
	}
	return out, nil
}

// peftModules reads PEFT's lora_A [r, in] and lora_B [out, r].
func peftModules(c *Config, pc *peftConfig, ts map[string]*stTensor) ([]loraModule, error) {
	ps, err := pairs(c, ts, peftKey, "base_model.model.model.layers.{i}.{self_attn,mlp}.{module}.lora_{A,B}.weight")
	if err != nil {
		return nil, err
	}
	var mods []loraModule
	for _, k := range slices.SortedFunc(maps.Keys(ps), cmpPair) {
		p := ps[k]
		i, _ := strconv.Atoi(k[0])
		full := "model.layers." + k[0] + "." + k[1]
		short := k[1][len("self_attn."):]
		if k[1][:4] == "mlp." {
			short = k[1][len("mlp."):]
		}
		if pc.targets != nil && !slices.Contains(pc.targets, short) {
			return nil, fmt.Errorf("model: adapter tensor %q: %s is not in adapter_config.json's target_modules %q", p[0].Name, short, pc.targets)
		}
		r, alpha := pc.rankAlpha(full)
		s := alpha / float64(r)
		if pc.RSLoRA {
			s = alpha / math.Sqrt(float64(r))
		}
		in, out, _ := loraDims(c, k[1])
		a, err := loraMatrix(p[0], r, in, false, "r (or rank_pattern)")
		if err != nil {
			return nil, err
		}
		b, err := loraMatrix(p[1], out, r, false, "r (or rank_pattern)")
		if err != nil {
			return nil, err
		}
		scale(b, float32(s))
		mods = append(mods, loraModule{layer: i, name: k[1], r: r, in: in, out: out, a: a, b: b})
	}
	sortModules(mods)
	return mods, nil
}

// mlxModules reads mlx-lm's lora_a [in, r] (= Aᵀ) and lora_b [r, out] (= Bᵀ)
// of the last num_layers layers.
func mlxModules(c *Config, mc *mlxConfig, ts map[string]*stTensor) ([]loraModule, error) {
	n := *mc.NumLayers
	if n == -1 {
		n = c.NumLayers
	}
	if n > c.NumLayers {
		return nil, fmt.Errorf("model: adapter_config.json: num_layers: %d, but the model has %d layers", n, c.NumLayers)
	}
	ps, err := pairs(c, ts, mlxKey, "model.layers.{i}.{self_attn,mlp}.{module}.lora_{a,b}")
	if err != nil {
		return nil, err
	}
	r := *mc.Params.Rank
	var mods []loraModule
	for _, k := range slices.SortedFunc(maps.Keys(ps), cmpPair) {
		p := ps[k]
		i, _ := strconv.Atoi(k[0])
		if i < c.NumLayers-n {
			return nil, fmt.Errorf("model: adapter tensor %q: layer %d is not among the last %d (num_layers)", p[0].Name, i, n)
		}
		if mc.Params.Keys != nil && !slices.Contains(mc.Params.Keys, k[1]) {
			return nil, fmt.Errorf("model: adapter tensor %q: %s is not in lora_parameters.keys %q", p[0].Name, k[1], mc.Params.Keys)
		}
		in, out, _ := loraDims(c, k[1])
		a, err := loraMatrix(p[0], r, in, true, "lora_parameters.rank")
		if err != nil {
			return nil, err
		}
		b, err := loraMatrix(p[1], out, r, true, "lora_parameters.rank")
		if err != nil {
			return nil, err
		}
		scale(b, float32(*mc.Params.Scale))
		mods = append(mods, loraModule{layer: i, name: k[1], r: r, in: in, out: out, a: a, b: b})
	}
	sortModules(mods)
	return mods, nil
}

// loraMatrix returns st as a (rows, cols) f32 matrix; stored transposed
// (mlx-lm) it must be [cols, rows]. rank names the config field giving r.
func loraMatrix(st *stTensor, rows, cols int, transposed bool, rank string) ([]float32, error) {
	want := []int{rows, cols}
	if transposed {
		want = []int{cols, rows}
	}
	if !slices.Equal(st.Shape, want) {
		return nil, fmt.Errorf("model: adapter tensor %q has shape %v, want %v (from config.json and adapter_config.json's %s)", st.Name, st.Shape, want, rank)
	}
	f, err := toF32(st)
	if err != nil {
		return nil, err
	}
	for _, v := range f {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("model: adapter tensor %q holds %v", st.Name, v)
		}
	}
	if !transposed {
		return f, nil
	}
	t := make([]float32, len(f))
	for i := range cols {
		for j := range rows {
			t[j*cols+i] = f[i*rows+j]
		}
	}
	return t, nil
}

// cmpPair orders pairs' keys by layer number, then module name.
func cmpPair(a, b [2]string) int {
	ia, _ := strconv.Atoi(a[0])
	ib, _ := strconv.Atoi(b[0])
	if ia != ib {
		return ia - ib
	}
	return strings.Compare(a[1], b[1])
}

func scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

func sortModules(mods []loraModule) {
	slices.SortFunc(mods, func(a, b loraModule) int {
		if a.layer != b.layer {
			return a.layer - b.layer
		}
		return strings.Compare(a.name, b.name)
	})
}

// LoadAdapter reads the LoRA adapter in dir, PEFT (adapter_config.json +
// adapter_model.safetensors) or mlx-lm (adapter_config.json +
// adapters.safetensors), checks it against the model and uploads A and s·B
// (f32) to the model's backend, once for every session. The model's weights
// are not touched: [Model.WeightBytes] stays the same and the adapter holds
// [Adapter.Bytes] more.
func (m *Model) LoadAdapter(dir string) (*Adapter, error) {
	format, mods, err := readAdapter(dir, m.Config)
	if err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	a := &Adapter{m: m, dir: dir, format: format, layers: make([][nSlots]*loraProj, m.Config.NumLayers)}
	up := func(name string, t *kernels.Tensor) (*kernels.Tensor, error) {
		u, err := m.b.Upload(t)
		if err != nil {
			return nil, fmt.Errorf("model: adapter tensor %s: %w", name, err)
		}
		a.bytes += int64(kernels.WeightBytes(u))
		return u, nil
	}
	for _, md := range mods {
		if err := m.net.canAdapt(md.layer, md.name); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("model.layers.%d.%s", md.layer, md.name)
		at, err := up(name+" A", kernels.FromF32(md.a, md.r, md.in))
		if err != nil {
			return nil, err
		}
		bt := kernels.FromF32(md.b, md.out, md.r)
		slots, rows := m.net.loraSlots(md.name)
		for j, slot := range slots {
			bs, err := up(name+" B", gatherRows(bt, rows[j]))
			if err != nil {
				return nil, err
			}
			if a.layers[md.layer][slot] != nil {
				return nil, fmt.Errorf("model: adapter %s adapts layer %d's %s twice (%s and a fused module)", dir, md.layer, slotNames[slot], md.name)
			}
			a.layers[md.layer][slot] = &loraProj{a: at, b: bs}
		}
		a.rank = max(a.rank, md.r)
	}
	m.log.Info("adapter loaded", "dir", dir, "format", format, "modules", len(mods), "bytes", a.bytes)
	return a, nil
}

// canAdapt reports whether layer i has module name as an unfused LoRA
// target can reach it.
func (m *llama) canAdapt(i int, name string) error {
	l := &m.layers[i]
	no := func(why string) error {
		return fmt.Errorf("model: adapter: layer %d's %s: %s", i, name, why)
	}
	attn := name[:len("mlp.")] != "mlp."
	switch {
	case attn && l.lin != nil:
		return no("a linear-attention layer has no such projection")
	case !attn && l.router != nil:
		return no("a mixture-of-experts layer has no such projection (adapting experts is not supported)")
	case (name == "self_attn.qkv_proj" || name == "mlp.gate_up_proj") && !m.arch.fusedPhi3:
		return no("this model has separate projections, not fused ones")
	case m.arch.fusedPhi3 && name != "self_attn.o_proj" && name != "mlp.down_proj" && len(loraTargets[name]) == 1:
		return no("this model stores qkv_proj and gate_up_proj fused: target those")
	}
	return nil
}

// Bytes returns the device memory of the adapter's A and B matrices.
func (a *Adapter) Bytes() int64 { return a.bytes }

// Dir returns the directory the adapter was loaded from.
func (a *Adapter) Dir() string { return a.dir }

// Format returns "peft" or "mlx".
func (a *Adapter) Format() string { return a.format }

// Close marks the adapter closed: sessions still using it fail their next
// forward with an error until they set another (or none). Its matrices stay
// in device memory until the model closes (a kernels.Backend frees
// tensors only when it closes; the CPU's go with the last reference).
// Close again does nothing.
func (a *Adapter) Close() error {
	a.m.mu.Lock() // no step of a session using it runs
	defer a.m.mu.Unlock()
	a.closed.Store(true)
	return nil
}

// errAdapterClosed is returned by a session whose adapter was closed.
var errAdapterClosed = errors.New("model: the session's adapter is closed (SetAdapter another, or nil)")

// SetAdapter makes the session run with adapter a, or the base model for
// nil. A change of adapter drops the cached tokens (their keys and values
// came from the other weights); nothing is reloaded. The scratch a
// LoRA projection needs, (L, r) and (L, out) per prefill and decode state, is
// allocated the first time an adapter is set (again for a larger rank).
func (s *Session) SetAdapter(a *Adapter) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.exit()
	if a != nil && a.m != s.m {
		return errors.New("model: SetAdapter: the adapter was loaded for another model")
	}
	if a != nil && a.closed.Load() {
		return errAdapterClosed
	}
	if a == s.adapter {
		return nil
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.unlock()
	s.Truncate(0)
	s.adapter = a
	if a == nil {
		s.batch.lora, s.one.lora = nil, nil
		return nil
	}
	for _, st := range []**loraActs{&s.batchLoRA, &s.oneLoRA} {
		L := s.batch.L
		if st == &s.oneLoRA {
			L = 1
		}
		if *st == nil || (*st).t.Cols() < a.rank {
			if *st != nil {
				s.bytes -= (*st).bytes
			}
			*st = newLoraActs(s.b, s.m.Config, L, a.rank)
			s.bytes += (*st).bytes
		}
	}
	s.batchLoRA.ad, s.oneLoRA.ad = a, a
	s.batch.lora, s.one.lora = s.batchLoRA, s.oneLoRA
	return nil
}

// Adapter returns the session's adapter, nil for the base model.
func (s *Session) Adapter() *Adapter { return s.adapter }

// loraActs is a forward state's LoRA scratch: t (L, rank) for x·Aᵀ and u
// (L, out) for t·(s·B)ᵀ, with views of the widths each projection needs.
type loraActs struct {
	ad     *Adapter
	t, u   *kernels.Tensor
	tv, uv map[int]*kernels.Tensor // views (L, n) by n
	bytes  int64
	// lastA and lastX are the A and x whose product t holds within a
	// group of apply calls (see apply).
	lastA, lastX *kernels.Tensor
}

func newLoraActs(b kernels.Backend, c *Config, L, rank int) *loraActs {
	out := max(c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim, c.HiddenSize, c.IntermediateSize)
	return &loraActs{t: b.New(L, rank), u: b.New(L, out), tv: map[int]*kernels.Tensor{}, uv: map[int]*kernels.Tensor{},
		bytes: 4 * int64(L*(rank+out))}
}

// rows returns the scratch for the first L rows.
func (la *loraActs) rows(L int) *loraActs {
	if L == la.t.Shape[0] {
		return la
	}
	return &loraActs{ad: la.ad, t: la.t.Rows(0, L), u: la.u.Rows(0, L), tv: map[int]*kernels.Tensor{}, uv: map[int]*kernels.Tensor{}}
}

// view returns t's storage as (rows(t), n), n ≤ t's columns, made once.
func view(cache map[int]*kernels.Tensor, t *kernels.Tensor, n int) *kernels.Tensor {
	if v, ok := cache[n]; ok {
		return v
	}
	L := t.Shape[0]
	v := *t
	v.Shape = []int{L, n}
	if v.Data != nil {
		v.Data = v.Data[:4*L*n]
	}
	cache[n] = &v
	return &v
}

// apply adds layer i's adapter of slot into dst (L, out), computed from
// x (L, in), when the session has an adapter that adapts it. first starts a
// group of slots computed from one x in a row (q, k, v; gate, up): within
// it, the slots of a fused module share x·Aᵀ, computed once.
func (la *loraActs) apply(b kernels.Backend, i, slot int, dst, x *kernels.Tensor, first bool) {
	if la == nil {
		return
	}
	if first {
		la.lastA = nil
	}
	p := la.ad.layers[i][slot]
	if p == nil {
		return
	}
	t := view(la.tv, la.t, p.a.Shape[0])
	u := view(la.uv, la.u, p.b.Shape[0])
	if p.a != la.lastA || x != la.lastX {
		b.MatMul(t, x, p.a) // (L, r)
		la.lastA, la.lastX = p.a, x
	}
	b.MatMul(u, t, p.b) // (L, out)
	b.Add(dst, dst, u)
}

// fuseAdapter reads the adapter in dir (none for "") for the loader to merge
// into the weights it loads (Options.Fuse).
func (l *loader) fuseAdapter(dir string, c *Config) error {
	if dir == "" {
		return nil
	}
	if l.synth != nil {
		return errors.New("model: Options.Fuse: synthetic weights take no adapter")
	}
	_, mods, err := readAdapter(dir, c)
	if err != nil {
		return err
	}
	l.fuse = map[string]*loraModule{}
	for i := range mods {
		l.fuse[fmt.Sprintf("model.layers.%d.%s", mods[i].layer, mods[i].name)] = &mods[i]
	}
	return nil
}

// fusedAll reports an adapter module the model has no weight for.
func (l *loader) fusedAll() error {
	for name := range l.fuse {
		return fmt.Errorf("model: Options.Fuse: the adapter adapts %s, which this model does not have", name)
	}
	return nil
}

// fused returns st (out, in) + B·A of adapter module md (B already × s) as
// a host tensor of st's float dtype.
func (l *loader) fused(module string, st *stTensor, md *loraModule, rows, cols int) (*stTensor, error) {
	dt, err := floatDType(st)
	if err != nil {
		return nil, fmt.Errorf("model: Options.Fuse: tensor %q is %s: merging an adapter needs float weights (load it unfused with LoadAdapter instead)", st.Name, st.DType)
	}
	if !isMatrix(st.Shape, rows, cols) || md.out != rows || md.in != cols {
		return nil, fmt.Errorf("model: Options.Fuse: tensor %q has shape %v, the adapter's %s is (%d, %d)", st.Name, st.Shape, module, md.out, md.in)
	}
	w, err := toF32(st)
	if err != nil {
		return nil, err
	}
	r := md.r
	for o := range rows {
		row := w[o*cols : (o+1)*cols]
		for k := range r {
			bk := md.b[o*r+k]
			for i, a := range md.a[k*cols : (k+1)*cols] {
				row[i] += bk * a
			}
		}
	}
	out := &stTensor{Name: st.Name, DType: st.DType, Shape: st.Shape, File: st.File}
	switch dt {
	case kernels.DTypeF32:
		out.Data = kernels.FromF32(w, len(w)).Data
	default:
		h := make([]uint16, len(w))
		for i, v := range w {
			if dt == kernels.DTypeF16 {
				h[i] = cpu.F32ToF16(v)
			} else {
				h[i] = cpu.F32ToBF16(v)
			}
		}
		out.Data = unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))
	}
	delete(l.fuse, module)
	return out, nil
}
