package ref

// SetEachMin sets each's threshold (0: every product's rows and every
// DeltaNet layer's heads take the parallel path, even a tiny model's) and
// returns what restores it.
func SetEachMin(n int) (restore func()) {
	old := eachMin
	eachMin = n
	return func() { eachMin = old }
}
