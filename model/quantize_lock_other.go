//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package model

import "os"

// lockQuantTemp makes no marker where flock is unavailable: the temporary directory
// then never counts as provably stale, and an interrupted run's leftovers stay.
func lockQuantTemp(dir string) (*os.File, error) { return nil, nil }

// removeIfStale never removes anything where flock is unavailable, as there is no
// way to tell a dead writer's directory from a live one's.
func removeIfStale(dir string) (bool, error) { return false, nil }
