// Package approvallink mints and checks the signed links that let an owner
// decide an approval from an e-mail or chat message.
//
// A link is bound to one approval id and the items_hash of the spend it was
// made for, names the channel it was sent through, and expires with the
// approval. It is an HMAC-SHA256 over those fields with a key only the
// service holds, so it cannot be forged or moved to another approval. It is
// single use because the decision it leads to is: once the approval is
// decided, every other link to it is refused by the approval itself, and a
// link whose items_hash no longer matches the spend is refused too.
package approvallink
