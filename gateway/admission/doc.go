// Package admission owns the gateway's drain state: Accepting, then
// Draining once shutdown begins. Listeners ask it whether to take new work;
// long-running calls watch Draining() to end promptly.
//
// It must not import gen/, broker/ or any listener package.
package admission
