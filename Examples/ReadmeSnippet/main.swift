import PeerKit

struct SomeCodableThing: Codable { let text: String }

// Create a transceiver (make sure you store it somewhere, like a property)
let transceiver = PeerTransceiver(serviceType: "example")

// Start it up!
transceiver.resume()

// Configure message receivers
transceiver.receive(SomeCodableThing.self) { payload in
    print("Got my thing! \(payload)")
}

// Broadcast message to peers
transceiver.broadcast(SomeCodableThing(text: "hello"))
