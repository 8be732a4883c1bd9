//go:build !amd64 || noasm

package cpu

type actSet struct {
	name string
	use  func() (restore func())
}

func actSets() []actSet { return []actSet{{"go", func() func() { return func() {} }}} }

func attnSets() []actSet { return actSets() }
