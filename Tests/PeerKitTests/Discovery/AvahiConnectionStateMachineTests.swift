import CAvahi
import Testing
@testable import PeerKit

extension DiscoveryTests {
    @Suite("Avahi connection state machine")
    struct AvahiConnectionStateMachineTests {
        private let noDaemon = Int32(AVAHI_ERR_NO_DAEMON)
        private let disconnected = Int32(AVAHI_ERR_DISCONNECTED)

        @Test func theFirstClientIsCreatedAtOnce() {
            var machine = AvahiConnectionStateMachine()
            #expect(machine.start() == [.connect(after: .zero)])
            #expect(machine.clientChanged(to: .running) == [.startServices])
        }

        @Test func anUnreachableDaemonIsReportedOnceAndRetriedWithACappedBackoff() throws {
            var machine = AvahiConnectionStateMachine()
            _ = machine.start()
            let first = machine.clientCreationFailed(code: noDaemon, message: "Daemon not running", random: 0.5)
            #expect(first.count == 2)
            guard case let .reportFailure(reason) = first.first else {
                Issue.record("the first failure was not reported: \(first)")
                return
            }
            #expect(reason.contains("avahi-daemon cannot be reached"))
            #expect(reason.contains("Daemon not running"))
            #expect(first.last == .connect(after: .milliseconds(250)))

            var delays: [Duration] = []
            for _ in 0..<10 {
                let actions = machine.clientCreationFailed(code: noDaemon, message: "Daemon not running", random: 0.5)
                guard actions.count == 1, case let .connect(delay) = actions[0] else {
                    Issue.record("a repeated failure did more than retry: \(actions)")
                    return
                }
                delays.append(delay)
            }
            #expect(delays.first == .milliseconds(500))
            #expect(delays == delays.sorted())
            #expect(delays.last == .seconds(5))
        }

        @Test func theDaemonAppearingLaterIsARecovery() {
            var machine = AvahiConnectionStateMachine()
            _ = machine.start()
            _ = machine.clientCreationFailed(code: noDaemon, message: "Daemon not running")
            _ = machine.clientCreationFailed(code: noDaemon, message: "Daemon not running")
            #expect(machine.clientChanged(to: .running) == [.startServices, .reportRecovery])
            #expect(machine.failedAttempts == 0)
            #expect(!machine.isFailing)
        }

        @Test func aDaemonRestartRecreatesTheClientAtOnceAndRecovers() {
            var machine = AvahiConnectionStateMachine()
            _ = machine.start()
            _ = machine.clientChanged(to: .running)
            let lost = machine.clientChanged(to: .failure(code: disconnected, message: "Daemon connection failed"))
            #expect(lost.count == 2)
            #expect(lost.last == .connect(after: .zero))
            // The new client waits for the daemon: no second report.
            #expect(machine.clientChanged(to: .connecting) == [])
            #expect(machine.clientChanged(to: .registering) == [.withdrawAdvertisement])
            #expect(machine.clientChanged(to: .running) == [.startServices, .reportRecovery])
        }

        @Test func aStoppedDaemonAtStartIsReportedWhileTheClientWaits() {
            var machine = AvahiConnectionStateMachine()
            _ = machine.start()
            let actions = machine.clientChanged(to: .connecting)
            guard actions.count == 1, case let .reportFailure(reason) = actions[0] else {
                Issue.record("CONNECTING was not reported as a failure: \(actions)")
                return
            }
            #expect(reason.contains("not running"))
            #expect(machine.clientChanged(to: .running) == [.startServices, .reportRecovery])
        }

        @Test func aHostNameCollisionWithdrawsTheAdvertisementUntilRunning() {
            var machine = AvahiConnectionStateMachine()
            _ = machine.start()
            _ = machine.clientChanged(to: .running)
            #expect(machine.clientChanged(to: .collision) == [.withdrawAdvertisement])
            #expect(machine.clientChanged(to: .running) == [.startServices])
        }

        @Test func repeatedDisconnectionsBackOff() {
            var machine = AvahiConnectionStateMachine()
            _ = machine.start()
            _ = machine.clientChanged(to: .failure(code: disconnected, message: "x"))
            let second = machine.clientChanged(to: .failure(code: disconnected, message: "x"), random: 0.5)
            #expect(second == [.connect(after: .milliseconds(500))])
        }
    }
}
