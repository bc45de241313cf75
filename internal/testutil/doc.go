// Package testutil holds the helpers that the tests of the core and of its
// companion modules share. Only tests import it.
package testutil
