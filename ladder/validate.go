package ladder

import (
	"fmt"

	"github.com/aprqa/apr/schema"
)

// Validate checks the receipt's JSON against the #Receipt definition of the
// embedded CUE schema. The error lists CUE's positioned messages.
func (r *Receipt) Validate() error {
	b, err := r.Encode()
	if err != nil {
		return fmt.Errorf("ladder: encoding the receipt: %w", err)
	}
	if err := schema.Validate(schema.DefReceipt, "receipt.json", b, nil); err != nil {
		return fmt.Errorf("%s", schema.Details(err))
	}
	return nil
}
