package chunkfile

// KeyForTesting makes a Key from fixed bytes (16, 24 or 32), for test vectors that a test must be
// able to decode. It lives in a test file so that the product has no way to make a known key: a
// known key protects nothing.
func KeyForTesting(secret []byte) (*Key, error) {
	if err := checkKeyBits(len(secret) * 8); err != nil {
		return nil, err
	}
	return &Key{secret: append([]byte(nil), secret...)}, nil
}
