package ladder

import (
	"context"

	"github.com/aprqa/apr/serve"
	"github.com/aprqa/apr/verdict"
)

// ServeRequests is how many concurrent requests a serve cell sends.
const ServeRequests = 8

// serve starts apr serve on the model in-process (loopback, 4 slots), sends
// ServeRequests concurrent requests (greedy and seeded, streamed and not,
// of different lengths; one chat request when the model has a template) and
// passes when each response's token ids equal the same request run alone
// through apr run's loop on the same backend, and the requests shared
// scheduler steps.
func (x *executors) serve(ctx context.Context, m *Model, backend string) Result {
	res, err := serve.Parity(ctx, serve.ParityOptions{Model: m.realPath(), Backend: backend,
		Requests: ServeRequests, Tokens: x.opts.RunTokens, Parallel: 4})
	if err != nil {
		return FromError(err)
	}
	values := []Value{
		{Name: "requests", Value: float64(res.Requests), Unit: "count"},
		{Name: "mismatches", Value: float64(res.Mismatches), Unit: "count", Threshold: verdict.Limit("==", 0)},
		{Name: "max_batch", Value: float64(res.MaxBatch), Unit: "count", Threshold: verdict.Limit(">=", 2)},
	}
	var out Result
	switch {
	case res.Mismatches > 0:
		out = Failed("%d of %d served requests differ from their solo run; first: %s", res.Mismatches, res.Requests, res.Notes[0])
	case res.MaxBatch < 2:
		out = Failed("the %d requests never shared a scheduler step (max batch %d): batching was not exercised", res.Requests, res.MaxBatch)
	default:
		out = Passed()
	}
	out.Values = values
	return out
}
