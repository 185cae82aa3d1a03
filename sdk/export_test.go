package sdk

// WaitGoroutines is waitGoroutines for the tests of package sdk_test.
var WaitGoroutines = waitGoroutines
