import Crypto
import Foundation
import _CryptoExtras

/// A pre-shared key for ``PeerSecurity/preSharedKey(_:)``: 32 secret bytes every peer of a group holds.
///
/// Make one with ``random()`` and hand it to every peer (for example as a key file read with
/// ``init(contentsOfFile:)``), or derive one from a passphrase with ``init(passphrase:)``.
///
/// A key never appears in a description, a log line or on the wire: peers only ever show its
/// ``keyID``, a short one-way digest that tells two keys apart without revealing either.
public struct PeerKey: Sendable, Hashable, CustomStringConvertible {
    /// The length of every key, in bytes.
    public static let byteCount = 32

    /// The largest key file ``init(contentsOfFile:)`` reads: 512 bytes. A key file holds 64
    /// hexadecimal digits and a line break (or 32 raw bytes); 512 leaves room for white space
    /// around them, and a larger file (a 1 GiB file, a log given by mistake) is refused with a
    /// sentence before a byte of it is read, rather than read whole into memory.
    public static let maximumFileBytes = 512

    /// The scrypt cost parameters used by ``init(passphrase:)`` (N = 2^15, r = 8, p = 1: about 32 MiB
    /// and a tenth of a second per guess on a desktop CPU).
    static let scryptRounds = 1 << 15
    static let scryptBlockSize = 8
    static let scryptParallelism = 1
    /// The salt of ``init(passphrase:)``: fixed, so that every peer derives the same key.
    static let passphraseSalt = Array("PeerKit pre-shared key v1".utf8)

    /// The secret bytes.
    let bytes: [UInt8]

    /// Creates a key from exactly 32 secret bytes.
    public init(bytes: some Collection<UInt8>) throws(PeerKitError) {
        guard bytes.count == Self.byteCount else {
            throw PeerKitError.invalidKey(reason: "a key is \(Self.byteCount) bytes long, and \(bytes.count) were given")
        }
        self.bytes = Array(bytes)
    }

    /// A new key of 32 bytes from the system's secure random generator.
    public static func random() -> PeerKey {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<byteCount).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        // 32 bytes were just made, so this cannot fail.
        return PeerKey(unchecked: bytes)
    }

    private init(unchecked bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Derives a key from a passphrase with scrypt (swift-crypto).
    ///
    /// Every peer that uses the same passphrase gets the same key. The key is only as strong as
    /// the passphrase: anyone who records one handshake can test guesses offline, and scrypt only
    /// makes each guess cost about a tenth of a second. A passphrase of four random words or more
    /// is fine; a word from a dictionary, a name or a short PIN is found in minutes. Prefer
    /// ``random()`` with a key file when you can.
    public init(passphrase: String) throws(PeerKitError) {
        guard !passphrase.isEmpty else {
            throw PeerKitError.invalidKey(reason: "the passphrase is empty")
        }
        do {
            let key = try KDF.Scrypt.deriveKey(
                from: Array(passphrase.utf8), salt: Self.passphraseSalt, outputByteCount: Self.byteCount,
                rounds: Self.scryptRounds, blockSize: Self.scryptBlockSize, parallelism: Self.scryptParallelism
            )
            self.bytes = key.withUnsafeBytes { Array($0) }
        } catch {
            throw PeerKitError.invalidKey(reason: "scrypt could not derive a key from the passphrase (\(error))")
        }
    }

    /// Parses a key from the text or bytes of a key file: 64 hexadecimal digits (surrounding
    /// white space is ignored), or exactly 32 raw bytes.
    public init(fileContents data: Data) throws(PeerKitError) {
        if let text = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines),
           text.count == Self.byteCount * 2, let bytes = Self.parseHex(text) {
            self.bytes = bytes
        } else if data.count == Self.byteCount {
            self.bytes = Array(data)
        } else {
            throw PeerKitError.invalidKey(reason: "a key file holds 64 hexadecimal digits or exactly 32 bytes, and this one holds \(data.count) bytes of something else")
        }
    }

    /// Reads a key file (see ``init(fileContents:)``): a regular file of at most
    /// ``maximumFileBytes``. A folder, a FIFO, a device or a larger file is refused with a sentence
    /// that says which, before anything is read from it.
    public init(contentsOfFile path: String) throws(PeerKitError) {
        let data: Data
        do {
            data = Data(try SmallFile.read(path, maximumBytes: Self.maximumFileBytes, what: "a key file").bytes)
        } catch {
            throw PeerKitError.invalidKey(reason: "the key file \(path) cannot be used: \(error.reason)")
        }
        do {
            try self.init(fileContents: data)
        } catch where error.code == .invalidKey {
            guard let reason = error.reason else { throw error }
            throw PeerKitError.invalidKey(reason: "\(reason) (in \(path))")
        }
    }

    /// The key as 64 lowercase hexadecimal digits: what ``init(fileContents:)`` reads back, and what
    /// `openssl s_client -psk` takes. It is the secret itself: keep it out of logs.
    public var hexEncodedSecret: String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    /// A short public name of the key: the first 8 bytes (16 hex digits) of
    /// HMAC-SHA256(key, "PeerKit key id v1"). Two peers with the same key id share the key; the id
    /// reveals nothing from which the key can be computed (HMAC is one-way), so it may be advertised.
    public var keyID: String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array("PeerKit key id v1".utf8), using: SymmetricKey(data: bytes))
        return mac.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// "pre-shared key <key id>", never the secret.
    public var description: String { "pre-shared key \(keyID)" }

    private static func parseHex(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count / 2)
        var high: UInt8?
        for c in text.utf8 {
            let nibble: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high {
                bytes.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return high == nil ? bytes : nil
    }
}
