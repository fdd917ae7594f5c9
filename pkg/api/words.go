package api

import "fmt"

// Count is n with the noun that agrees with it: "1 node", "3 nodes".
func Count(n int, one, many string) string {
	return fmt.Sprintf("%d %s", n, Agree(n, one, many))
}

// Agree is the word that agrees with n: one when n is 1, many otherwise
// ("has" or "have", "carries" or "carry").
func Agree(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
