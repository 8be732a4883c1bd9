package ingot

import (
	"errors"

	"github.com/ingot-llm/ingot/model"
)

// An Adapter is a LoRA adapter loaded for a [Model] (PEFT's or mlx-lm's
// files), applied at run time beside the shared base weights: any number of
// adapters and the base are served by one copy of the model, and each
// session chooses its own with [Session.SetAdapter]. It is read-only and
// safe for concurrent use.
type Adapter struct {
	m *Model
	a *model.Adapter
}

// LoadAdapter loads the LoRA adapter in dir: adapter_config.json with
// adapter_model.safetensors (PEFT) or adapters.safetensors (mlx-lm). The
// base weights are not copied: the adapter adds [Adapter.Bytes] of device
// memory. To merge an adapter into the weights instead (faster, but the
// model then serves only it), load with [Options.Fuse].
func (m *Model) LoadAdapter(dir string) (*Adapter, error) {
	a, err := m.m.LoadAdapter(dir)
	if err != nil {
		return nil, err
	}
	return &Adapter{m: m, a: a}, nil
}

// Bytes returns the adapter's device memory: its A and B matrices.
func (a *Adapter) Bytes() int64 { return a.a.Bytes() }

// Raw returns the token-level adapter (package model).
func (a *Adapter) Raw() *model.Adapter { return a.a }

// Close retires the adapter: sessions still using it fail until they set
// another one (or none). On a GPU its matrices stay in device memory until
// the model closes.
func (a *Adapter) Close() error { return a.a.Close() }

// SetAdapter makes the session generate with adapter a, or with the base
// model for nil. Changing adapters empties the session's cache (its keys and
// values came from other weights); nothing is reloaded.
func (s *Session) SetAdapter(a *Adapter) error {
	if a == nil {
		return s.s.SetAdapter(nil)
	}
	if a.m != s.m {
		return errors.New("ingot: SetAdapter: the adapter was loaded for another model")
	}
	return s.s.SetAdapter(a.a)
}
