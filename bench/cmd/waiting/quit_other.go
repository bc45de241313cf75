//go:build !unix

package main

import "errors"

// quitSelf would send the process SIGQUIT, which only Unix has.
func quitSelf() error { return errors.New("-mode dump needs SIGQUIT: Unix only") }
